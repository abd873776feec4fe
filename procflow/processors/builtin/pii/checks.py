"""Validators behind the PII rules: checksums and range checks, no regexes.

Every function here is pure and deterministic: Luhn (payment cards), ISO 13616
mod-97 (IBAN), the SSA's published SSN ranges, Base58Check and Bech32/Bech32m
(Bitcoin addresses), IP addresses (``ipaddress``), calendar dates, and Shannon
entropy (for secrets without a known prefix).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
from collections import Counter
from datetime import date
from functools import lru_cache

__all__ = [
    "BASE58_ALPHABET",
    "BECH32_CHARSET",
    "IBAN_LENGTHS",
    "base58check_valid",
    "bech32_valid",
    "card_brand",
    "iban_valid",
    "ip_valid",
    "luhn_valid",
    "plausible_birth_date",
    "shannon_entropy",
    "ssn_valid",
]

BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

#: Country code -> IBAN length (SWIFT IBAN registry).
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27,
    "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

# (first digits, allowed lengths) of the major card networks' IIN ranges.
_IIN_RANGES: tuple[tuple[str, range, tuple[int, ...]], ...] = (
    ("visa", range(4, 5), (13, 16, 19)),
    ("mastercard", range(51, 56), (16,)),
    ("mastercard", range(2221, 2721), (16,)),
    ("amex", range(34, 35), (15,)),
    ("amex", range(37, 38), (15,)),
    ("discover", range(6011, 6012), (16, 17, 18, 19)),
    ("discover", range(644, 650), (16, 17, 18, 19)),
    ("discover", range(65, 66), (16, 17, 18, 19)),
    ("unionpay", range(62, 63), (16, 17, 18, 19)),
    ("diners", range(300, 306), (14, 15, 16, 17, 18, 19)),
    ("diners", range(36, 37), (14, 15, 16, 17, 18, 19)),
    ("diners", range(38, 40), (16, 17, 18, 19)),
    ("jcb", range(3528, 3590), (16, 17, 18, 19)),
    ("maestro", range(50, 51), (12, 13, 14, 15, 16, 17, 18, 19)),
    ("maestro", range(56, 59), (12, 13, 14, 15, 16, 17, 18, 19)),
    ("maestro", range(67, 68), (12, 13, 14, 15, 16, 17, 18, 19)),
)
_IIN_WIDTHS = tuple((brand, prefixes, lengths, len(str(prefixes.start)))
                    for brand, prefixes, lengths in _IIN_RANGES)

# Numbers the SSA never issued because they were printed in advertising.
_ADVERTISED_SSNS = frozenset({"078051120", "219099999"})
_SSN_SHAPE = re.compile(r"[0-9]{3}([- ]?)[0-9]{2}\1[0-9]{4}")
_BECH32_CONSTS = {1: "bech32", 0x2BC830A3: "bech32m"}
_BECH32_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn (mod 10) check.

    Args:
        digits: Digits only (no separators).
    """
    if not digits.isdigit() or not digits.isascii():
        return False
    backwards = digits[::-1]
    # every second digit from the right is doubled (less 9 above 9): a table of digits
    total = sum(map(int, backwards[0::2])) + sum(map(int, backwards[1::2].translate(_DOUBLED)))
    return total % 10 == 0


_DOUBLED = str.maketrans("0123456789", "0246813579")


def card_brand(digits: str) -> str | None:
    """The card network whose IIN range and length fit ``digits``, or ``None``."""
    if digits[:1] in "01789" and digits.isascii() and digits.isdigit():
        return None  # no range starts with 0, 1, 7, 8 or 9
    for brand, prefixes, lengths, width in _IIN_WIDTHS:
        if len(digits) in lengths and int(digits[:width]) in prefixes:
            return brand
    return None


def iban_valid(iban: str) -> bool:
    """Whether ``iban`` (spaces allowed) has a known country, its length and mod-97 == 1."""
    compact = iban.replace(" ", "").upper()
    if not compact.isascii() or not compact.isalnum() or len(compact) < 5:
        return False
    expected = IBAN_LENGTHS.get(compact[:2])
    if expected is None or len(compact) != expected or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def ssn_valid(ssn: str) -> bool:
    """Whether a US SSN (``AAA-GG-SSSS``, ``AAA GG SSSS`` or 9 digits) is in an issuable range.

    Rejects area 000, 666 and 900-999, group 00, serial 0000, and the two numbers the
    SSA voided after they appeared in advertising.
    """
    if not _SSN_SHAPE.fullmatch(ssn):
        return False
    digits = ssn.replace("-", "").replace(" ", "")
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    return digits not in _ADVERTISED_SSNS


def base58check_valid(address: str, *, versions: bytes = b"\x00\x05") -> bool:
    """Whether ``address`` is Base58Check with a 20-byte payload and a version in ``versions``.

    The defaults are Bitcoin's P2PKH (0x00, "1...") and P2SH (0x05, "3...") versions.
    """
    number = 0
    for ch in address:
        index = BASE58_ALPHABET.find(ch)
        if index < 0:
            return False
        number = number * 58 + index
    leading = len(address) - len(address.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    raw = b"\x00" * leading + body
    if len(raw) != 25 or raw[0] not in versions:
        return False
    check = hashlib.sha256(hashlib.sha256(raw[:-4]).digest()).digest()[:4]
    return check == raw[-4:]


def _bech32_polymod(values: list[int]) -> int:
    chk = 1
    for value in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ value
        for i, gen in enumerate(_BECH32_GEN):
            if (top >> i) & 1:
                chk ^= gen
    return chk


def _convert_bits(data: list[int], from_bits: int, to_bits: int) -> list[int] | None:
    acc = bits = 0
    out: list[int] = []
    max_value = (1 << to_bits) - 1
    for value in data:
        acc = (acc << from_bits) | value
        bits += from_bits
        while bits >= to_bits:
            bits -= to_bits
            out.append((acc >> bits) & max_value)
    if bits >= from_bits or (acc << (to_bits - bits)) & max_value:
        return None
    return out


def bech32_valid(address: str, *, hrp: str = "bc") -> bool:
    """Whether ``address`` is a valid segwit address (BIP 173 / BIP 350) for ``hrp``.

    Checks the lowercase charset, the Bech32 (v0) or Bech32m (v1+) checksum, the witness
    version and the program length.
    """
    if address != address.lower() or not address.startswith(hrp + "1"):
        return False
    data_part = address[len(hrp) + 1:]
    if len(data_part) < 7 or any(ch not in BECH32_CHARSET for ch in data_part):
        return False
    data = [BECH32_CHARSET.index(ch) for ch in data_part]
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    kind = _BECH32_CONSTS.get(_bech32_polymod(expanded + data))
    if kind is None:
        return False
    version, program = data[0], _convert_bits(data[1:-6], 5, 8)
    if program is None or version > 16 or not 2 <= len(program) <= 40:
        return False
    if version == 0:
        return kind == "bech32" and len(program) in (20, 32)
    return kind == "bech32m"


@lru_cache(maxsize=1024)
def ip_valid(candidate: str) -> bool:
    """Whether ``candidate`` is an IPv4 or IPv6 address (IPv4 octets without leading 0s).

    Cached by value: logs and configs repeat the same addresses, and ``ipaddress``
    takes ~5-10 us to parse one (half of the IP rule on a text full of them)."""
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return True


def plausible_birth_date(year: int, month: int, day: int, *, today: date | None = None) -> bool:
    """Whether the numbers form a real calendar date between 1900 and today."""
    today = today or date.today()
    try:
        when = date(year, month, day)
    except ValueError:
        return False
    return date(1900, 1, 1) <= when <= today


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (0.0 for an empty string)."""
    if not text:
        return 0.0
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())
