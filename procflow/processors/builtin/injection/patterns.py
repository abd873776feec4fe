"""Building blocks of the prompt-injection rule tables: the ``Rule`` record, the
pattern mini-syntax, and the shared vocabulary of attack phrasing.

Patterns match the folded, lower-cased views of ``_text``. Inside a pattern
(outside ``[...]`` classes) a literal space means "a run of separators" (spaces,
punctuation, newlines), ``" ?"`` means "maybe some separators" and ``~`` means "up
to three more words"; unless ``edges=False`` a pattern must start and end at word
edges. Flags refine a rule: ``negatable`` (skipped after "don't"/"never"),
``howto`` (halved inside a how-do-I question about the technique),
``unless_before`` / ``unless_after`` (skipped in a benign context), ``near`` (needs
a second pattern within 200 characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from procflow.textscan._views import WORD_GAP, compile_pattern

__all__ = [
    "ADJ",
    "AI",
    "AI_ACTION",
    "CATEGORIES",
    "DANGER",
    "DE",
    "DESTINATION",
    "DET",
    "ENC",
    "FREE",
    "IGNORE",
    "IND",
    "IO",
    "JB",
    "LEAK",
    "LIMITS",
    "OBJ",
    "RM",
    "RULE_NOUN",
    "SECRET",
    "SENSITIVE",
    "SHOW",
    "SO",
    "SPE",
    "SUBJ",
    "TA",
    "TEMP",
    "YOU_ARE",
    "Rule",
    "rule",
]

CATEGORIES: tuple[str, ...] = ("injection", "jailbreak", "tool-exfiltration",
                               "data-exfiltration", "system-override", "role-manipulation")
"""The detection types the rules score (the origin's defaults)."""

@dataclass(frozen=True, slots=True)
class Rule:
    """One weighted pattern.

    Attributes:
        name: Short id, shown in reasons.
        category: The detection type it scores.
        family: The attack family, shown in reasons.
        weight: Its score when it matches (0..1).
        pattern: The compiled pattern (on lower-cased views).
        squashed: The pattern for the letters-only view, for rules worth it.
        negatable: Skip a match right after "not", "don't", "never".
        howto: Halve the weight inside a question about how something works.
        unless_before: Skip when the text just before the match matches this.
        unless_after: Skip when the text just after the match matches this.
        near: Only count when this also matches within 200 characters.
        embedded: Only count inside quoted or bracketed content (text the user pasted:
            an email, a web page, a review), where instructions to the AI are injected.
    """

    name: str
    category: str
    family: str
    weight: float
    pattern: re.Pattern[str]
    squashed: re.Pattern[str] | None = None
    negatable: bool = False
    howto: bool = False
    unless_before: re.Pattern[str] | None = None
    unless_after: re.Pattern[str] | None = None
    near: re.Pattern[str] | None = None
    embedded: bool = False


def rule(name: str, category: str, family: str, weight: float, pattern: str, *,
       squash: bool = False, edges: bool = True, negatable: bool = False, howto: bool = False,
       unless_before: str | None = None, unless_after: str | None = None,
       near: str | None = None, embedded: bool = False) -> Rule:
    squashed = None
    if squash:
        letters_only = (WORD_GAP.sub("", pattern).replace(" ?", "").replace("~", "")
                        .replace(" ", "").replace(")*", "){0,4}").replace(")+", "){1,4}"))
        squashed = re.compile(letters_only)
    return Rule(
        name, category, family, weight, compile_pattern(pattern, edges=edges), squashed, negatable,
        howto,
        re.compile(unless_before) if unless_before else None,
        re.compile(unless_after) if unless_after else None,
        compile_pattern(near, edges=False) if near else None, embedded)


# -- vocabulary -------------------------------------------------------------------------

IGNORE = (r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|forget about|skip|"
           r"bypass|overlook|neglect|abandon|discard|dismiss|override|overwrite|overrule|set aside|"
           r"throw out|throw away|cancel|scrap|ditch|toss|pay no attention to|never mind|nevermind|"
           r"don't worry about|stop following)")
OBJ = (r"(?:instructions?|rules?|prompts?|directives?|directions?|guidelines?|guidance|"
        r"commands?|programming|constraints?|restrictions?|training|conditioning|protocols?)")
TEMP = r"(?:above|previous|prior|preceding|earlier|foregoing|former)"
ADJ = (r"(?:above|previous|prior|preceding|earlier|foregoing|former|original|initial|old|"
        r"existing|given|default|system|safety|developer|hidden|secret|programmed|built-in|"
        r"core|ethical|moral|content|current|standard|usual|normal|openai|anthropic|setup|"
        r"starting|baseline|base|configured|assigned|underlying)")
DET = r"(?:the |your |these |those |this |its |all the |all of the |all your |all of your )"
AI = (r"(?:ai|a\.i|assistant|chatbot|language model|llm|bot|model|claude|chatgpt|gpt|"
       r"ai assistant|ai model|ai language model)")
YOU_ARE = r"(?:you are|you're|youre|ur)"
SUBJ = r"(?:you|you're|you are|yourself|the ai|an ai|ai|assistant|chatbot|chatgpt|gpt|dan)"
FREE = (r"(?:have no|has no|had no|with no|with zero|without(?: any)?|"
        r"free (?:of|from)(?: any| all)?|"
         r"freed from(?: all| any)?|liberated from(?: all| any)?|(?:are|is|be|been) unbound by|"
         r"(?:not|never|no longer|isn't|aren't|wasn't|is not|are not) (?:bound|restricted|limited|"
         r"constrained|governed|held back) "
         r"by(?: any)?|(?:don't|do not|doesn't|does not|no longer|never) (?:have|follow|abide by|"
         r"adhere to|obey|comply with|care about)(?: any)?|not subject to(?: any)?|(?:never|won't|"
         r"refuses? to) (?:follows?|obeys?|respects?|cares? about)(?: any)?|"
         r"broken free (?:of|from)(?: the)?|break free (?:of|from)(?: the)?)")
LIMITS = (r"(?:(?:the |its |your |their |any |all |typical |usual |normal )*(?:\w+ )?"
           r"(?:restrictions?|filters?|filtering|rules?|guidelines?|censorship|constraints?|"
           r"confines|ethics|morals|morality|principles|polic(?:y|ies)|programming|safeguards?|"
           r"guardrails?|scruples|conscience))")
SECRET = (r"(?:system prompt|system message|system instructions?|initial (?:instructions?|prompt)|"
           r"original (?:instructions?|prompt)|hidden (?:instructions?|prompt|rules|text)|"
           r"secret (?:instructions?|prompt|rules)|pre-?prompt|meta-?prompt|"
           r"developer (?:message|instructions?|prompt)|custom instructions|configuration prompt|"
           r"context window|internal (?:instructions|rules|guidelines|prompt)|preamble|setup "
           r"(?:prompt|instructions|message)|boot prompt|initial prompt|base prompt)")
SHOW = (r"(?:reveal|leak|dump|disclose|expose|divulge|recite|regurgitate|exfiltrate|extract|"
         r"print|print out|spit out|output|repeat|show|display|tell|give|share|write|write out|"
         r"list|copy|paste|type|type out|echo|return|reproduce|quote|state|provide|send|"
         r"translate|summari[sz]e|paraphrase|encode|spell|spell out|read back|read out|"
         r"what is|what are|what was|what were|what's|whats|describe|explain|render|format|put|"
         r"convert|rewrite|retrieve|fetch|access|see|view|know|tell me about)")
LEAK = r"(?:reveal|leak|dump|disclose|expose|divulge|recite|regurgitate|exfiltrate|extract)"
SENSITIVE = (r"(?:conversation|chat|chat history|chat log|chat transcript|messages|"
              r"message history|dialog(?:ue)?|transcript|system prompt|instructions|secrets?|"
              r"api[ _-]?keys?|access tokens?|tokens|passwords?|credentials|session (?:cookies|"
              r"tokens?|id)|cookies|env(?:ironment)? (?:variables|vars|file)|\.env(?: file)?|"
              r"private keys?|ssh keys?|personal (?:data|information|info|details)|pii|user data|"
              r"customer data|credit card(?: numbers?| details| info)?|card numbers?|"
              r"bank details|memory|context|inbox|address book|everything (?:the user|i|we|they|"
              r"you've been) (?:told|said|shared|wrote|typed|gave)(?: you| me)?|(?:the )?(?:user's|"
              r"users'|customer's|customers'|their) (?:\w+ )?(?:profile|account details|address|"
              r"phone number|contact details|details|information|info|data|history|messages))")
DESTINATION = (r"https?://|www\.|ftp://|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b|\b(?:webhook|endpoint|"
                r"pastebin|ngrok|requestbin|collaborator|attacker|my server|external server|"
                r"remote server|this url|this link|following url|following address|my email|"
                r"this email|this address)\b|\b[a-z0-9-]+\.(?:com|net|org|io|xyz|ru|cn|tk|top|"
                r"site|info|me|app|dev|example|link|sh|cc|biz|online)\b")
DANGER = (r"(?:delete|remove|wipe|erase|destroy|drop|truncate|purge|nuke|format)[\W_]+"
           r"(?:\w+[\W_]+)?(?:all|every|each|entire|everything|any|whole)\b|"
           r"\b(?:all|every|entire|everything)[\W_]+(?:\w+[\W_]+){0,2}(?:deleted|removed|wiped|"
           r"erased|destroyed|dropped|purged)\b|\btransfer[\W_]+(?:all|the entire|the whole|"
           r"the full)\b|rm\s+-[rf]{1,2}\b|drop\s+table|id\s*=\s*['\"]?\*|"
           r"\b(?:passwords?|credentials|api[ _-]?keys?|secrets|private keys?|ssh keys?|"
           r"chat history|conversation history|system prompt|credit card numbers?)\b|"
           r"\bsend[\W_]+(?:the[\W_]+|all[\W_]+(?:the[\W_]+)?)?(?:money|funds|payments?|refunds?)"
           r"[\W_]+to[\W_]+(?:my|this|the following|an?)[\W_]+(?:account|wallet|card|iban)\b")

AI_ACTION = (r"\b(?:ignore|disregard|forget|override|bypass|do not tell|don't tell|reveal|delete|"
              r"execute|new instructions|forward|send|email|upload|post|recommend|rate|output|"
              r"reply with|respond with)\b")
RULE_NOUN = (r"(?:instructions?|rules|guidelines|guidance|directives|programming|policies|"
             r"restrictions|filters|guardrails|safeguards|constraints|prompt|system prompt|"
             r"moderation|training|orders)")

# -- attack families (shown in reasons) ---------------------------------------------
IO, JB, RM = "instruction-override", "jailbreak", "role-manipulation"
SO, SPE, DE = "system-override", "system-prompt-exfiltration", "data-exfiltration"
TA, IND, ENC = "tool-abuse", "indirect-injection", "encoded-payload"
