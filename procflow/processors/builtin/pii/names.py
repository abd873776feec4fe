"""Person names for the opt-in "name" PII type, offline: cues and a census gazetteer.

Names have no format to check, so two kinds of evidence are used, and precision on
hard negatives (product names, capitalised words at sentence starts, place names)
comes before recall:

- **Cues** (confidence 0.85 with a gazetteer name, else 0.7): capitalised words right
  after "my name is", "Name:", "Attn:", a title (Mr, Ms, Dr, Herr, Mme...), a
  salutation ("Dear", "Hi" + comma), a sign-off ("Regards,", "Best,"), an e-mail
  header ("From: Jane Doe <"); 2-3 Han characters after 我叫 / 姓名：.
- **The gazetteer** (``data/names.txt.gz``, built by ``scripts/build_names.py`` from
  the public-domain 1990 US Census name lists): a run of 2-4 capitalised words
  holding a census first name followed by a census surname (0.75), or by an unknown
  capitalised word when the first name is frequent and not an English word (0.65).
  The same run right before an e-mail address or a phone number is a name at 0.85
  (the neighbours of other PII).

A gazetteer run is dropped when any of its words is a place, organisation or product
word (River, University, Inc, Watch, Tesla, Texas...), when it follows "the", when a
product word or a number follows it, when both its first name and its surname are
everyday English words ("Rose Gold", "Will Power"), or when it starts a sentence
with such a word ("Will Johnson come?"). A frequent surname that is also a place word
("Park", "Hall") counts only in a two-word run after a frequent first name, not at a
sentence start nor after "in"/"at"/"visit". A single capitalised word is never a name
without a cue ("Jordan" as a country, "Apple"). The 1990 census lists know few
non-European names: those are found through cues and neighbouring PII only.
"""

from __future__ import annotations

import gzip
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from procflow.processors.builtin._detection import PIIDetection

__all__ = ["Gazetteer", "find_names", "gazetteer", "name_key"]

# -- the gazetteer ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gazetteer:
    """Census first names and surnames (lower-case ASCII key -> frequency rank, 0 =
    most frequent) and the names that are also everyday English words."""

    first: dict[str, int]
    last: dict[str, int]
    common: frozenset[str]


@cache
def gazetteer() -> Gazetteer:
    """The shipped gazetteer, read once (about 27,000 names, ~95 KB compressed)."""
    raw = files("procflow.processors.builtin.pii").joinpath("data/names.txt.gz").read_bytes()
    sections: dict[str, list[str]] = {"first": [], "last": [], "common": []}
    current: list[str] | None = None
    for line in gzip.decompress(raw).decode("ascii").splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections[line.strip("[]")]
        elif current is not None:
            current.append(line)
    return Gazetteer({n: i for i, n in enumerate(sections["first"])},
                     {n: i for i, n in enumerate(sections["last"])},
                     frozenset(sections["common"]))


def name_key(token: str) -> str:
    """A word as the gazetteer spells it: accents, apostrophes and case dropped
    ("Müller" -> "muller", "O'Brien" -> "obrien")."""
    if token.isascii():
        return token.lower().replace("'", "")
    folded = unicodedata.normalize("NFKD", token)
    return "".join(ch for ch in folded if ch.isascii() and ch.isalpha()).lower()


# -- hand-written exclusions (not census data) ------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PLACE_ORG_WORDS = _words("""
river rivers lake lakes valley beach beaches bay island islands mountain mountains mount
mt springs falls creek county city town village canyon harbor harbour port heights
square bridge forest gardens center centre station airport hospital clinic university
college school academy institute church cathedral chapel museum library hotel motel
stadium arena tower towers mall market plaza court courthouse park parkway street avenue
road boulevard lane drive highway freeway district province state states republic
kingdom empire ocean sea desert national international airlines airways bank banks fund
capital holdings partners associates group inc corp corporation llc ltd co company
foundation trust society council committee department ministry agency office bureau
board commission club team united fc hall theater theatre cinema studios records press
media news times post journal gazette tribune herald magazine brothers bros sons
industries systems labs technologies solutions services software network networks
restaurant cafe bar grill pizza kitchen bakery farms farm ranch estate estates memorial
award awards prize pier wharf zoo aquarium boardwalk trail tech motors health energy
express foods pharma festival conference summit games cup open championship series
league tour
""")
_PRODUCT_WORDS = _words("""
watch phone iphone ipad ipod macbook imac pad pro max mini plus air ultra lite series
edition model galaxy pixel surface echo kindle alexa siri cortana chrome firefox safari
edge windows office excel word outlook teams xbox playstation switch console tv laptop
tablet app apps cloud os sdk api beta version release update pack kit card cards
sneakers shoes jeans perfume cologne whiskey whisky bourbon vodka beer wine sauce
""")
_BRANDS = _words("""
apple google microsoft amazon tesla dell lenovo samsung nokia motorola sony intel nvidia
cisco oracle adobe ibm hp asus acer huawei xiaomi oneplus mercedes benz bmw audi porsche
ferrari lamborghini maserati chevrolet chevy toyota honda nissan hyundai kia lexus
subaru mazda volkswagen volvo jeep dodge chrysler cadillac lincoln buick harley davidson
nike adidas puma reebok gucci prada versace chanel dior armani hilfiger klein lauren
kors spade jacobs hermes cartier tiffany rolex omega disney pixar marvel netflix spotify
uber lyft airbnb walmart costco kroger safeway macys wendys starbucks nestle pepsi coca
cola heinz kellogg kelloggs hershey mattel lego hasbro barbie ikea philips siemens bosch
canon nikon kodak fuji casio yamaha boeing airbus fedex ups dhl paypal visa mastercard
amex chase citi wells fargo goldman sachs morgan stanley jp jpmorgan
""")
_PLACES = _words("""
alabama alaska arizona arkansas california colorado connecticut delaware florida georgia
hawaii idaho illinois indiana iowa kansas kentucky louisiana maine maryland
massachusetts michigan minnesota mississippi missouri montana nebraska nevada hampshire
jersey mexico york carolina dakota ohio oklahoma oregon pennsylvania rhode tennessee
texas utah vermont virginia washington wisconsin wyoming america canada england scotland
wales ireland britain france germany spain italy portugal netherlands belgium
switzerland austria sweden norway denmark finland poland russia ukraine china japan
korea india pakistan israel egypt nigeria kenya africa brazil argentina chile peru
colombia australia zealand europe asia london paris berlin madrid rome tokyo beijing
shanghai sydney toronto vancouver chicago boston houston dallas austin seattle denver
atlanta miami phoenix detroit portland brooklyn manhattan queens bronx hollywood angeles
francisco diego jose vegas orleans louis antonio philadelphia baltimore cleveland
nashville memphis oakland sacramento pittsburgh cincinnati springfield columbus
charlotte jacksonville indianapolis milwaukee albuquerque tucson omaha
""")
# Capitalised words that open a run but are no first name ("Thanks", "Hello", days...).
_NOT_NAMES = _words("""
team all there everyone support sir madam customer customers friend friends folks guys
admin user client colleagues valued the a an is and your our my this that not again in
advance for so much service sales manager hr world mr mrs ms dr prof hello hi hey dear
thanks thank regards best sincerely cheers monday tuesday wednesday thursday friday
saturday sunday january february march april may june july august september october
november december christmas easter god lord jesus king queen prince princess saint san
santa st north south east west new old great little big happy merry
""")


# Capitalised words that open place names ("Santa Monica", "Fort Worth", "New Haven").
_PLACE_PREFIXES = _words("""
san santa st saint north south east west new fort port mount mt lake upper lower great
little old los las la el le des del
""")


def _blocked(key: str) -> bool:
    """A place, organisation, product or brand word: no name runs through it."""
    return key in _PLACE_ORG_WORDS or key in _PRODUCT_WORDS or key in _BRANDS


# -- cue rules ------------------------------------------------------------------------

_WORD = r"[^\W\d_][^\W\d_'’-]*(?:[-'’][^\W\d_]+)?"
_NAME = r"(?P<name>" + _WORD + r"(?:[ \t]+(?:[A-Z]\.[ \t]+)?" + _WORD + r"){0,2})"
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Herr|Frau|Mme|Mlle|Sr|Sra)\.?[ \t]+"


def _cue(words: str) -> str:
    """A case-insensitive alternation of cue words at a word start, gated on the words'
    first letters (a character class the regex engine skips through quickly)."""
    alternatives = words.split("|")
    firsts = sorted({w[0].lower() for w in alternatives} | {w[0].upper() for w in alternatives})
    return r"(?<!\w)(?=[" + "".join(firsts) + r"])(?i:" + words + ")"


_NAME_CUES = tuple(re.compile(pattern, re.MULTILINE) for pattern in (
    # "my name is", "Name:", "Customer:", ... then the name
    _cue("my name is|my name's|full name|name|patient|customer|cardholder|account holder|"
         "contact person|attn|attention|je m'appelle|ich heiße|ich heisse|me llamo|"
         "mi nombre es|nombre|nom|mi chiamo|contact|emergency contact|dependent|dependant|"
         "spouse|applicant|passenger|guest|recipient|beneficiary|account name|titulaire|"
         "signed|signed by|this is|i am|i'm")
    + r"[ \t]*[:,-]?[ \t]*(?:" + _TITLE + ")?" + _NAME,
    # a title
    r"\b" + _TITLE + _NAME,
    # a salutation, the name closed by punctuation or the line's end
    _cue("dear|hi|hello|hey") + r"[ \t]+(?:" + _TITLE + ")?" + _NAME
    + r"(?=[ \t]*(?:[,!:\n]|$))",
    # a sign-off, the name on the same line or the next
    _cue("regards|best regards|kind regards|warm regards|sincerely|yours sincerely|"
         "yours truly|thanks|thank you|many thanks|cheers|best|all the best|warmly|"
         "respectfully|take care")
    + r"[ \t]*[,!.]?[ \t]*\n[ \t]*(?:-+[ \t]*)?" + _NAME + r"(?=[ \t]*(?:[,.\n]|$))",
    _cue("regards|best regards|kind regards|sincerely|thanks|thank you|cheers")
    + r",[ \t]*" + _NAME + r"(?=[ \t]*(?:[,.\n]|$))",
    # an e-mail header: From: Jane Doe <jane@example.com>
    r"^[ \t]*(?i:from|to|cc|reply-to):[ \t]*" + _NAME + r"(?=[ \t]*<)",
))
# Cues that also begin ordinary sentences: their name must be in the gazetteer, and
# for the first group not an everyday word either ("I am Happy", "Thanks, Will").
_WEAK_CUE = re.compile(r"(?i)^(?:this is|i am|i'm|signed|best|thanks|thank you|cheers)\b")
_NOUN_CUE = re.compile(r"(?i)^(?:contact|name|nom|guest|customer|patient|passenger|recipient|"
                       r"dependent|spouse)\b(?![ \t]*[:-])")
_HAN_NAME = re.compile(r"(?:我叫|我的名字是|我係|我是|姓名[:：]\s*|名前[:：]\s*)"
                       r"(?P<name>[\u4e00-\u9fff]{2,3})(?=[\s，,。.！!？?：:、）)]|$)")


def _cue_tokens(raw: str) -> list[str]:
    """The leading capitalised, unexcluded words of a cue's capture."""
    kept: list[str] = []
    for token in raw.split():
        if not token[0].isupper() or (token.isupper() and len(token) > 2):
            break
        key = name_key(token)
        if key in _NOT_NAMES or _blocked(key) or (key in _PLACES and not _known(key)):
            break
        kept.append(token)
    return kept


def _known(key: str) -> bool:
    names = gazetteer()
    return key in names.first or key in names.last


def _cue_names(text: str) -> Iterator[PIIDetection]:
    for pattern in _NAME_CUES:
        for m in pattern.finditer(text):
            tokens = _cue_tokens(m.group("name"))
            name = " ".join(tokens)
            if len(name) < 2 or text[m.start("name"):m.start("name") + len(name)] != name:
                continue
            keys = [name_key(t.rstrip(".")) for t in tokens]
            known = any(_known(k) for k in keys if len(k) > 1)
            plain = any(_known(k) and k not in gazetteer().common for k in keys if len(k) > 1)
            if (not plain and _WEAK_CUE.match(m.group())) or (
                    not known and _NOUN_CUE.match(m.group())):
                continue
            start = m.start("name")
            yield PIIDetection("name", start, start + len(name), name, 0.85 if known else 0.7)
    for m in _HAN_NAME.finditer(text):
        yield PIIDetection("name", m.start("name"), m.end("name"), m.group("name"), 0.7)


# -- gazetteer runs -------------------------------------------------------------------

_CAP = "[A-ZÀ-ÖØ-ÞĀ-ſ]"
_LOW = "[a-zß-öø-ÿĀ-ſ]"
_TOKEN = _CAP + "(?:['’]" + _CAP + ")?" + _LOW + "+(?:" + _CAP + _LOW + "+)?(?:-" + _CAP \
    + _LOW + "+)?"
_RUN = re.compile(r"(?<![\w'’.@/-])" + _TOKEN + r"(?:[ \t]+(?:[A-Z]\.[ \t]+)?" + _TOKEN
                  + r"){1,3}(?![\w@])")
_SPLIT = re.compile(_TOKEN + "|[A-Z]\\.")
_NEIGHBOUR_PII = re.compile(
    r"[ \t]*(?:([<(\[])[ \t]*|,[ \t]*|[ \t]-[ \t]|:[ \t]*)(?:mailto:)?"
    r"(?:[\w.%+-]+@[\w-]+\.[\w.-]+|\+?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4})")
_AFTER = re.compile(r"[ \t]*(?:\d|(?:" + "|".join(sorted(_PRODUCT_WORDS)) + r")\b)", re.I)
_PLACE_BEFORE = re.compile(r"(?i)\b(?:in|at|near|around|across|through|into|visit|visited|"
                           r"visiting|from|to|towards)[ \t]+$")
_SENTENCE_END = frozenset(".!?\n\"“”'‘’([{*#>:;-•")


def _starts_sentence(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END


def _after_the(text: str, start: int) -> bool:
    before = text[max(0, start - 5):start].lower()
    return before.endswith(("the ", "the\t"))


def _display_name(keys: list[str]) -> tuple[int, int, float] | None:
    """The name in a run written right before "<email>" or "(email)": the words after
    any leading greeting or role word, even when the gazetteer does not know them."""
    first = next((i for i, k in enumerate(keys) if k not in _NOT_NAMES), len(keys))
    if len(keys) - first < 2 or any(k in _NOT_NAMES for k in keys[first:]):
        return None
    common = gazetteer().common
    return (first, len(keys) - 1, 0.8) if not all(k in common for k in keys[first:]) else None


def _run_name(tokens: list[str], neighbour: int) -> tuple[int, int, float] | None:
    """(first token, last token, confidence) of the name in a run of capitalised
    words, or None. ``neighbour``: 2 when an "<email>" or "(email)" follows the run,
    1 for another e-mail address or phone number right after it, else 0."""
    names = gazetteer()
    keys = [name_key(t.rstrip(".")) for t in tokens]
    if any(k in _PLACES for k in keys[1:]):
        return None
    if any(_blocked(k) for k in keys):
        return _surname_like_place(keys)
    if neighbour == 2 and (display := _display_name(keys)) is not None:
        return display
    first = next((i for i, k in enumerate(keys) if k in names.first
                  and k not in _NOT_NAMES), None)
    if first is None or any(k in _PLACE_PREFIXES for k in keys[:first]):
        return None
    last = len(keys) - 1
    while last > first and (len(keys[last]) < 2 or keys[last] in _NOT_NAMES):
        last -= 1
    if last == first:
        return None
    f_key, l_key = keys[first], keys[last]
    middle_ok = all(len(k) < 2 or k in names.first or k in names.last
                    for k in keys[first + 1:last])
    if not middle_ok:
        return None
    common = (f_key in names.common) + (l_key in names.common)
    if neighbour:
        return (first, last, 0.85) if common < 2 else None
    if common == 2:
        return None
    if l_key in names.last:
        return first, last, 0.75
    if f_key in names.common or f_key in _PLACES or names.first[f_key] >= 1000 \
            or len(l_key) < 3 \
            or l_key.endswith("s"):  # an unknown plural: a team or a product line
        return None
    return first, last, 0.65


def _surname_like_place(keys: list[str]) -> tuple[int, int, float] | None:
    """"Jennifer Park", "Kevin Hall": a frequent first name that is no English word, then
    a frequent surname that is also a place word (top 1,000 of both lists), alone."""
    names = gazetteer()
    if len(keys) != 2 or _blocked(keys[0]) or keys[0] in names.common \
            or keys[0] in _PLACES or names.first.get(keys[0], 1000) >= 1000 \
            or names.last.get(keys[1], 1000) >= 1000:
        return None
    return 0, 1, 0.65


def _gazetteer_names(text: str) -> Iterator[PIIDetection]:
    for m in _RUN.finditer(text):
        spans = [(t.start(), t.end()) for t in _SPLIT.finditer(m.group())]
        tokens = [m.group()[a:b] for a, b in spans]
        end = m.start() + spans[-1][1]
        after = _NEIGHBOUR_PII.match(text, end)
        neighbour = 0 if after is None else 2 if after.group(1) else 1
        found = _run_name(tokens, neighbour)
        if found is None:
            continue
        first, last, confidence = found
        start, stop = m.start() + spans[first][0], m.start() + spans[last][1]
        if not neighbour:
            if _after_the(text, start) or _AFTER.match(text, stop):
                continue
            if _starts_sentence(text, start) and name_key(tokens[first]) in gazetteer().common:
                continue
            before = text[max(0, start - 16):start]
            if _blocked(name_key(tokens[last])) and (
                    _starts_sentence(text, start) or _PLACE_BEFORE.search(before)):
                continue  # "Victoria Park is nice", "a walk in Victoria Park"
        yield PIIDetection("name", start, stop, text[start:stop], confidence)


def find_names(text: str) -> Iterator[PIIDetection]:
    """Personal names (see the module docstring); the detector resolves overlaps."""
    yield from _cue_names(text)
    yield from _gazetteer_names(text)
