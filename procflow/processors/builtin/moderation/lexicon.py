"""The offline moderation lexicon: weighted terms and short phrases per category.

Matching uses the same folded views as the injection rules (case, spacing,
zero-width characters, homoglyphs, leetspeak) and the same pattern mini-syntax
(``injection.patterns``). Before matching, common idioms are blanked out — "kill the
process", "this bug is killing me", "shoot me an email", "execute the script",
"bath bomb", "I'll destroy you at chess" — so only the remaining text is scored.

A term can score several categories ("I will kill you": harassment/threatening and
violence). Per category, non-overlapping matches combine by noisy-OR; a
subcategory's score lifts its parent (hate/threatening -> hate). Sexual content
next to a word for a minor scores sexual/minors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from procflow.processors.builtin._detection import Evidence
from procflow.processors.builtin.moderation import idioms
from procflow.processors.builtin.moderation.idioms import RE2_GROUP, mask_idioms
from procflow.textscan import DEFAULT_ENGINE, Engine, views_for_matching
from procflow.textscan._anchors import JointScan, PatternTable
from procflow.textscan._views import compile_pattern, sentence_bounds

__all__ = ["MODERATION_CATEGORIES", "NEAR_REACH", "PARENTS", "TERMS", "LexiconScan", "Term",
           "flagged_spans", "score_text", "term_spans"]

MODERATION_CATEGORIES: tuple[str, ...] = (
    "hate", "hate/threatening", "harassment", "harassment/threatening", "self-harm",
    "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
    "violence/graphic")
PARENTS: dict[str, str] = {
    "hate/threatening": "hate", "harassment/threatening": "harassment",
    "self-harm/intent": "self-harm", "self-harm/instructions": "self-harm",
    "sexual/minors": "sexual", "violence/graphic": "violence"}


@dataclass(frozen=True, slots=True)
class Term:
    """A weighted pattern.

    Attributes:
        name: Short id, shown in reasons.
        weights: Category -> weight when it matches.
        pattern: The compiled pattern.
        near: Only count when this also matches within 150 characters.
    """

    name: str
    weights: tuple[tuple[str, float], ...]
    pattern: re.Pattern[str]
    near: re.Pattern[str] | None = None


def _t(name: str, weights: dict[str, float], pattern: str, *, near: str | None = None,
       edges: bool = True) -> Term:
    return Term(name, tuple(weights.items()), compile_pattern(pattern, edges=edges),
                compile_pattern(near, edges=False) if near else None)


_GROUP = (r"(?:immigrants?|refugees?|foreigners|migrants|muslims?|jews|jewish people|christians|"
          r"hindus|sikhs|buddhists|atheists|catholics|black people|blacks|white people|whites|"
          r"asians|africans|arabs|latinos|hispanics|mexicans|chinese people|indians|gays|"
          r"gay people|lesbians|trans people|transgender people|queers|women|females|"
          r"disabled people|the disabled|gypsies|roma|(?:everyone|all|people|those) (?:from|of) "
          r"(?:that|this|their|your) (?:religion|country|race|tribe|ethnicity|culture|faith))")
_DEHUMAN = (r"(?:vermin|animals|subhuman|sub-human|savages|parasites|cockroaches|rats|a disease|"
            r"a plague|a cancer|filth|garbage|trash|scum|inferior|worthless|disgusting|evil|"
            r"not human|less than human|degenerates|apes|monkeys|pigs|an infestation|a virus|"
            r"(?:an? )?(?:filthy |dirty |disgusting )(?:animals?|rats?|dogs?|pigs?|parasites?|"
            r"cockroach(?:es)?|vermin|savages?))")
_INSULT = (r"(?:stupid|dumb|pathetic|worthless|useless|ugly|disgusting|brainless|incompetent|"
           r"revolting|fat|retarded|(?:the )?(?:dumbest|stupidest|ugliest|worst|most pathetic|"
           r"most useless|most worthless) (?:person|human|idiot|man|woman|thing|loser)|(?:an? )?("
           r"?:idiot|moron|imbecile|dumbass|loser|joke|pig|clown|"
           r"freak|scumbag|failure|jerk|creep|embarrassment|disgrace|nobody|worm|rat|cockroach|"
           r"snake|"
           r"maggot|parasite|leech|weasel|waste of (?:space|"
           r"oxygen|air)|piece of (?:garbage|trash|junk))|trash|garbage|scum|vermin|filth)")
_I_WILL = (r"(?:i'll|i will|i'm going to|i am going to|i'm gonna|im gonna|i am gonna|imma|i'ma|"
           r"i want to|i wanna|i plan to|i intend to|i would love to|i'd love to|i swear i'll|"
           r"i swear i will|we will|we'll|we're going to|we are going to|we're gonna|i shall|"
           r"i'm about to|i am about to|i'm coming to|i will come and|i'll come and)")
_HARM = (r"(?:kill|murder|hurt|stab|shoot|strangle|choke|punch|slap|attack|assault|burn|torture|"
         r"slit|snap|crush|rip out|cut|"
         r"break|bury|slaughter|beat up|beat|smash|gut|skin|hunt down|find and kill|run over|"
         r"poison|end|destroy)")
_VICTIM = (r"(?:people|everyone|everybody|civilians|hostages|children|kids|students|classmates|"
           r"coworkers|co-workers|worshippers|shoppers|passengers|crowd|humans|a person|someone|"
           r"somebody|police officers|cops|the president|protesters|pedestrians|strangers|tourists|"
           r"the crowd|my (?:boss|neighbou?r|wife|husband|"
           r"girlfriend|boyfriend|teacher|classmates?|coworkers?|family|parents?|mom|dad|mother|"
           r"father|brother|sister|kids|roommate|landlord|ex))")
_SELF = (r"(?:kill myself|killing myself|end (?:my life|it all|everything|things)|ending (?:my "
         r"life|it all|everything)|commit suicide|committing suicide|"
         r"die(?! (?:my|your|his|her|their|the|it) )|hurt myself|cut myself|"
         r"harm myself|take my (?:own )?life|not (?:be alive|exist|wake up)|overdose|hang myself|"
         r"jump off|(?:take|swallow) (?:all )?(?:of )?(?:my|the|these|those) (?:\w+ )?(?:pills|"
         r"tablets|meds|medication))")
_SEXUAL = (r"(?:porn|porno|pornography|pornographic|xxx|hentai|explicit sex|sexually explicit|"
           r"sex scenes?|erotica|erotic (?:story|stories|scene|roleplay|content|photos?)|smut|"
           r"nudes|"
           r"nude (?:photos?|pics?|pictures|images|selfies|videos?)|naked (?:photos?|pics?|"
           r"pictures|images|videos?)|sexting|have sex with|having sex with|sex with (?:me|you|"
           r"her|him)|masturbat\w*)")
_MINOR = (r"\b(?:child|children|kid|kids|minor|minors|underage|under-age|preteens?|pre-teens?|"
          r"teenagers?|teens?|schoolgirls?|schoolboys?|little (?:girl|boy)s?|toddlers?|infants?|"
          r"young (?:girl|boy)s?|middle schoolers?|(?:[1-9]|1[0-7])[- ]?(?:year[- ]?olds?|yo|y/o)"
          r")\b")

TERMS: tuple[Term, ...] = (
    # hate
    _t("dehumanising-word", {"hate": 0.6}, r"subhuman|sub-human|less than human|untermensch"),
    _t("pseudo-science", {"hate": 0.8},
       rf"{_GROUP} (?:are|is) (?:genetically |naturally |inherently |biologically |just )?(?:less "
       r"intelligent|inferior|stupider|dumber|more violent|born criminals|criminals by nature|less "
       r"evolved)"),
    _t("dehumanising-group", {"hate": 0.85},
       rf"(?:all |those |these |the |most |every |many )?{_GROUP} (?:are|is|were|r) (?:all |just |"
       rf"nothing but |basically |literally |such |so |a bunch of |a pack of )*{_DEHUMAN}"),
    _t("hatred-of-group", {"hate": 0.6},
       rf"(?:hate|despise|loathe|can't stand|detest) (?:all |those |these |the |every )?{_GROUP}"),
    _t("denied-rights", {"hate": 0.7},
       rf"{_GROUP} (?:don't|do not|shouldn't|should not) (?:deserve|have|get) (?:any )?(?:rights|"
       rf"to vote|to live here|to exist)|{_GROUP} (?:don't|do not) belong (?:here|in this country)|"
       rf"{_GROUP} (?:shouldn't|should not|must not|mustn't) be allowed to (?:vote|live|exist|work|"
       r"marry|enter|breed|have children|immigrate|own|teach)"),
    _t("go-back", {"hate": 0.55},
       r"go back to (?:your|their) (?:own )?(?:country|countries|homeland|jungle|cave)"),
    _t("supremacy", {"hate": 0.75},
       r"(?:inferior|superior|master|pure) race|racial purity|white (?:power|supremacy)|"
       r"heil hitler|hitler was right|holocaust (?:never happened|was a hoax|was fake)"),
    _t("exterminate-group", {"hate/threatening": 0.9, "violence": 0.8},
       rf"(?:kill|exterminate|eliminate|wipe out|gas|shoot|hang|lynch|slaughter|eradicate|purge|"
       rf"get rid of|burn) (?:all|every|each|the|those|these) (?:\w+ )?{_GROUP}|{_GROUP} (?:should|"
       r"must|need to|deserve to|ought to|will) (?:all )?(?:die|burn|hang|be (?:killed|exterminated"
       r"|wiped out|eradicated|gassed|shot|hanged|lynched|eliminated|purged))"),
    # harassment
    _t("insult-you", {"harassment": 0.65},
       rf"(?:you are|you're|youre|ur|u r|you|you're just|you are just) (?:such |so |a |an |the |"
       r"just |really |truly |absolute |complete |total |biggest |nothing but |most |completely |"
       r"totally |utterly |absolutely |honestly |literally |seriously |genuinely |sad |little "
       rf"|tiny |filthy |miserable |lazy |disgusting |worthless |pathetic )*{_INSULT}|"
       r"(?:pathetic|sad|poor|worthless|miserable) excuse (?:for|of) an? (?:human|person|man|"
       r"woman|being|parent|human being)"),
    _t("mild-insult-you", {"harassment": 0.35},
       r"(?:you are|you're|youre|ur|you) (?:so |really |such a |a |an )?(?:annoying|weird|lame|"
       r"boring|rude|clueless|slow|dense|silly|a pain|a nerd|a dork|lazy|ignorant|childish|"
       r"immature|irritating)"),
    _t("insult-word", {"harassment": 0.3},
       r"idiot|moron|imbecile|dumbass|loser|scumbag|jerk|bastard|douchebag|halfwit|nitwit"),
    _t("shut-up", {"harassment": 0.3}, r"shut up|shut your (?:mouth|face|trap)|stfu"),
    _t("curse-at", {"harassment": 0.45},
       r"f[\W_]*[u*][\W_]*[c*][\W_]*k (?:you|u|off)|screw you|damn you|go to hell|to hell with "
       r"you"),
    _t("isolation", {"harassment": 0.6},
       r"(?:nobody|no one|noone) (?:likes|loves|cares about|wants|would miss) you|(?:everyone|"
       r"everybody) hates you|(?:the )?world (?:would be|is) better (?:off )?without you|(?:nobody|"
       r"no one) (?:would|will) (?:care|notice|cry|miss you)(?: \w+)?|(?:everyone|everybody) "
       r"(?:laughs at|is laughing at|makes fun of|mocks) you|(?:nobody|"
       r"no one) (?:would|will) (?:care|notice|cry|miss you)(?: if you (?:died|disappeared|were "
       r"gone|left|vanished))?"),
    _t("tell-to-self-harm", {"harassment": 0.85, "harassment/threatening": 0.85, "self-harm": 0.5},
       r"kill yourself|kys|go (?:and )?die|drink bleach|unalive yourself|end yourself|hang "
       r"yourself|jump off a (?:bridge|cliff|building)|nobody would miss you if you died"),
    # threats
    _t("threat-against-you", {"harassment/threatening": 0.9, "violence": 0.85},
       rf"{_I_WILL} (?:\w+ )?{_HARM} (?:you|u|ya|y'all|all of you|your (?:\w+ )?(?:family|kids|"
       r"children|wife|husband|mom|mother|dad|father|dog|face|neck|legs|head|house|car|throat|"
       r"skull|"
       r"bones|arms|teeth|jaw|kneecaps))"),
    _t("threat-to-hospitalise", {"harassment/threatening": 0.85, "violence": 0.75},
       rf"{_I_WILL} (?:\w+ )?(?:put|send) (?:you|u) (?:in|into|to|six feet) (?:the )?(?:hospital|"
       r"ground|grave|morgue|icu|wheelchair|under)"),
    _t("threat-against-others", {"violence": 0.8, "harassment/threatening": 0.5},
       rf"{_I_WILL} (?:\w+ )?{_HARM} (?:him|her|them|{_VICTIM})"),
    _t("i-know-where-you-live", {"harassment/threatening": 0.8},
       r"i know where you (?:live|work|sleep|go to school)|(?:i'll|i will) find (?:out )?where you"
       r" live"),
    _t("hunt-you-down", {"harassment/threatening": 0.75},
       r"(?:i|we)(?:'ll| will|'m going to| am going to|'re going to| are going to) (?:find|hunt|"
       r"track) (?:you|u)(?: down)?"),
    _t("make-you-suffer", {"harassment/threatening": 0.7},
       r"(?:i|we)(?:'ll| will|'m going to| am going to) make (?:you|your life) (?:suffer|hell|"
       r"miserable|a living hell|pay)"),
    _t("watch-your-back", {"harassment/threatening": 0.6},
       r"(?:watch|better watch) your back|sleep with one eye open|your days are numbered"),
    _t("you-are-dead", {"harassment/threatening": 0.55},
       r"(?:you're|you are|youre) (?:so )?(?:dead|going to die|gonna die|finished)(?! (?:right|"
       r"wrong|tired|serious|inside|to me))"),
    _t("regret-this", {"harassment/threatening": 0.4},
       r"you(?:'ll| will) (?:regret|pay for) (?:this|it|that)"),
    # self-harm
    _t("self-harm-first-person", {"self-harm": 0.6},
       r"(?:cutting|burning|hurting|harming|starving|punishing) myself|(?:i|i'm|i am|i've|i have|"
       r"i keep|i started|i relapsed|my)(?: \w+){0,3} (?:self-?harm(?:ing)?|suicidal)|(?:sometimes|"
       r"often|always|keep|still|again|started to|start to|want to|need to|urge to) (?:\w+ )?"
       r"(?:cut|burn|hurt|harm|starve|punish) myself"),
    _t("self-harm-mention", {"self-harm": 0.4}, r"self-?harm(?:ing)?|suicidal"),
    _t("suicide-word", {"self-harm": 0.4},
       r"suicide|kill myself|end my life|take my (?:own )?life|overdos(?:e|ing)"),
    _t("self-harm-intent", {"self-harm/intent": 0.9, "self-harm": 0.85},
       rf"(?:i|i'm|im|i am) (?:\w+ ){{0,2}}?(?:want|wanna|going|gonna|plan|planning|intend|"
       r"intending|decided|need|ready|about|thinking about|thinking of|considering|trying|"
       rf"tempted) (?:to )?{_SELF}"),
    _t("self-harm-now", {"self-harm/intent": 0.9, "self-harm": 0.85},
       r"(?:i'm|i am|im) (?:\w+ )?(?:ending|killing|taking) (?:my (?:own )?life|myself|it all)"),
    _t("no-will-to-live", {"self-harm/intent": 0.8, "self-harm": 0.75},
       r"(?:don't|do not|no longer) want to (?:live|be alive|exist|wake up|be here)(?: anymore)?|"
       r"(?:i'd|i would) be better off dead|(?:everyone|they|my family) (?:would be|is|are) "
       r"better off without me|(?:can't|cannot) go on (?:anymore|like this|living)|(?:life is|"
       r"my life is) (?:not worth living|pointless)|goodbye cruel world|suicide note|(?:no "
       r"reason|nothing left|nothing) to live for|no reason to (?:live|go on|keep going)"),
    _t("self-harm-method", {"self-harm/instructions": 0.9, "self-harm": 0.8},
       r"(?:how|which|what|ways?|best way|easiest way|quickest way|fastest way|painless(?:ly)?|"
       r"least painful way|surest way|methods?|tips) (?:\w+ ){0,6}?(?:to )?(?:kill myself|commit "
       r"suicide|end my "
       r"(?:own )?life|overdose|hang myself|cut myself|slit my wrists|self-?harm|hurt myself|die "
       r"painlessly|kill yourself)"),
    _t("lethal-dose", {"self-harm/instructions": 0.85, "self-harm": 0.7},
       r"how many (?:\w+ )?(?:pills|tablets|mg|milligrams|sleeping pills|painkillers|tylenol|"
       r"paracetamol|ibuprofen)(?: \w+){0,4}? (?:to|would it take to|does it take to|before (?:i|"
       r"you)) (?:die|overdose|kill (?:me|myself|you|a person|someone)|be fatal|be lethal)"),
    _t("lethal-amount", {"self-harm/instructions": 0.85, "self-harm": 0.7},
       r"(?:what|which|how much) (?:\w+ )?(?:dose|amount|quantity|number) of (?:\w+ ){1,2}"
       r"(?:would|will|could|to|is enough to|does it take to) (?:kill (?:me|myself)|be (?:lethal|"
       r"fatal) (?:for|to) me|end my life)"),
    _t("lethal-dose-mention", {"self-harm": 0.45}, r"lethal dose|fatal dose"),
    # sexual
    _t("explicit-content", {"sexual": 0.75}, _SEXUAL),
    _t("explicit-request", {"sexual": 0.85},
       r"(?:write|describe|generate|create|tell) (?:me )?(?:an? |the |some )?(?:\w+ )?(?:erotic|"
       r"explicit|steamy|sexual|nsfw|dirty|x-rated|smutty|lewd) (?:story|stories|scene|fanfic|"
       r"fan fiction|poem|roleplay|role-play|content|description|chat|text)"),
    _t("explicit-body", {"sexual": 0.75},
       r"(?:describe|depict|write about|detail) (?:her|his|their|a|the|my|your) (?:naked|nude) "
       r"(?:\w+ )?(?:body|bodies|breasts|chest)|(?:naked|nude|sexual|erotic|intimate) (?:\w+ ){0,3}"
       r"(?:in )?(?:explicit|graphic|vivid) detail"),
    _t("nsfw", {"sexual": 0.55}, r"nsfw|talk dirty|dirty talk|sext me"),
    _t("nude-request", {"sexual": 0.75},
       r"(?:pics?|pictures|photos?|images|videos?|selfies) of (?:you|yourself|her|him|them|your "
       r"(?:\w+ )?)(?: \w+)? (?:naked|nude|undressed|topless)"),
    _t("suggestive", {"sexual": 0.3},
       r"sexy|horny|naughty|hook ?up|make out|turned on|lingerie|seductive|sex|sexual|sexually|"
       r"naked|nude"),
    _t("minor-abuse-material", {"sexual/minors": 0.95},
       r"child (?:porn|pornography|sexual abuse material)|csam|(?:sexual|sexy|nude|naked|"
       r"explicit|erotic) (?:\w+ )?(?:photos? |pictures? |images? |videos? |content )?(?:of |with "
       r"|involving )?(?:a |an )?(?:child|children|kids?|minors?|underage|preteens?|toddlers?|"
       r"(?:[1-9]|1[0-7])[- ]?(?:year[- ]?olds?|yo))"),
    # violence
    _t("harm-people", {"violence": 0.75},
       rf"(?:kill|murder|stab|shoot|strangle|behead|decapitate|torture|slaughter|massacre|lynch|"
       rf"maim|assassinate|gun down|run over|poison|bomb) (?:all |as many |all the |the |some )?"
       rf"{_VICTIM}"),
    _t("animal-cruelty", {"violence": 0.7},
       r"(?:torture|torturing|abuse|abusing|burn|burning|drown|drowning|poison|poisoning|stab|"
       r"mutilate|skin) (?:the |a |my |that |this |some |his |her |their )?(?:cat|dog|puppy|kitten"
       r"|animal|pet|bird|horse|rabbit|hamster)s?"),
    _t("harm-animal", {"violence": 0.45},
       r"(?:kill|hurt|beat|kick) (?:the |a |my |that |this |some )?(?:cat|dog|puppy|kitten|animal|"
       r"pet)s?"),
    _t("arson-threat", {"violence": 0.85, "harassment/threatening": 0.5},
       rf"{_I_WILL} (?:\w+ )?(?:set fire to|burn down|torch|firebomb) (?:the |a |my |our |their |"
       r"his |her |that |this |your )?(?:\w+ )?(?:mosque|church|synagogue|temple|school|house|home|"
       r"building|office|car|store|shop|clinic|station|shelter|embassy)"),
    _t("arson", {"violence": 0.45},
       r"(?:set fire to|burn down|torch|firebomb) (?:the |a |my |our |their |his |her |that |this "
       r"|your )?(?:\w+ )?(?:mosque|church|synagogue|temple|school|house|home|building|office|"
       r"shelter|embassy)"),
    _t("deserves-violence", {"violence": 0.6},
       r"(?:should|deserves? to|needs? to|ought to) be (?:beaten|raped|killed|shot|hanged|hung|"
       r"tortured|burned|stabbed|lynched|murdered)"),
    _t("you-deserve-violence", {"harassment/threatening": 0.75, "violence": 0.6},
       r"(?:you|like you|your kind|people like you) (?:\w+ ){0,2}?(?:should|deserve to|need to|"
       r"ought to) be (?:beaten|raped|killed|shot|hanged|hung|tortured|burned|stabbed|lynched|"
       r"murdered)"),
    _t("weapon-making", {"violence": 0.85},
       r"how (?:do i|to|can i|would i|could i|do you|can you) (?:make|build|create|assemble|"
       r"construct|cook) (?:a |an |my own )?(?:homemade )?(?:bomb|pipe bomb|ied|explosive(?: "
       r"device)?|molotov(?: cocktail)?|nail bomb|car bomb|dirty bomb|bioweapon|chemical weapon|"
       r"nerve agent|ghost gun|napalm|ricin|sarin|anthrax|nerve gas|poison gas|chlorine gas)|("
       r"?:make|build) (?:a |an )?(?:pipe bomb|ied|nail bomb|car "
       r"bomb|molotov)"),
    _t("attack-target", {"violence": 0.85},
       r"(?:shoot|shooting) up (?:the |a |my |our )?(?:school|mall|church|mosque|synagogue|temple|"
       r"office|party|concert|club|class|campus)|blow up (?:the |a |my |our )?(?:\w+ )?(?:building"
       r"|school|plane|train|bus|church|mosque|synagogue|office|stadium|bridge|embassy|station|"
       r"hospital)"),
    _t("attack-plan", {"violence": 0.55},
       r"(?:plan|planning|plot|plotting) (?:a |an |the )?(?:\w+ )?(?:shooting|bombing|massacre|"
       r"murder|assassination|terror attack|terrorist attack)"),
    _t("beat-to-death", {"violence": 0.8},
       r"beat(?:en|ing|s)? (?:\w+ ){0,2}?(?:to death|to a pulp|senseless|until (?:he|she|they) ("
       r"?:bleeds?|dies?"
       r"|stops? (?:breathing|moving)))|stab(?:bed|bing)? (?:\w+ ){0,2}?(?:to death|repeatedly|in "
       r"the (?:neck|heart|chest|back))"),
    _t("mass-violence-mention", {"violence": 0.45},
       r"mass shootings?|massacres?|genocide|terrorist attacks?|bombings?"),
    _t("violent-word", {"violence": 0.3},
       r"kill|killing|murder|murdering|stab|stabbing|shoot|shooting|strangle|behead|torture"),
    _t("graphic-injury", {"violence/graphic": 0.75, "violence": 0.5},
       r"dismember(?:ed|ing|ment)?|disembowel(?:ed|ing|ment)?|decapitated|eviscerat\w+|mutilated "
       r"(?:body|bodies|corpses?|victims?)|severed (?:head|heads|limbs?|arms?|legs?|hands?|"
       r"fingers?)|entrails|(?:guts|intestines) (?:spilling|everywhere|spilled|hanging)|brains? "
       r"(?:splattered|blown out|everywhere)|skull (?:crushed|caved in|split open)|flesh (?:torn|"
       r"ripped|peeled|melting)|torn limb from limb"),
    _t("flaying", {"violence/graphic": 0.75, "violence": 0.5},
       r"skin (?:is |was |being )?(?:peeled|flayed|ripped|torn|stripped) off|flayed alive|(?:peel|"
       r"peeled|peeling|rip|ripped|ripping|tear|tore|tearing|flay|flayed|flaying) (?:off )?(?:his|"
       r"her|their|the victim's|someone's) skin"),
    _t("graphic-mild", {"violence/graphic": 0.45},
       r"blood (?:spurting|gushing|spraying|everywhere|splattered|pooling)|gore|gory|gruesome"),
    _t("graphic-request", {"violence/graphic": 0.8, "violence": 0.6},
       r"(?:describe|depict|write|show|narrate|detail|tell|recount|explain)(?: \w+){0,5} (?:in )?"
       r"(?:(?:graphic|gory|gruesome|grisly|vivid|explicit|excruciating) )+detail",
       near=r"\b(?:tortur\w*|kill\w*|murder\w*|death|dismember\w*|wounds?|injur\w*|stab\w*|"
            r"execution|massacre|behead\w*|mutilat\w*|blood)\b"),
)

_MINORS = re.compile(_MINOR)
_MINOR_CONTEXT = 0.6  # sexual terms at least this strong count next to a minor


@dataclass(frozen=True, slots=True)
class _Hit:
    term: str
    category: str
    weight: float
    start: int
    end: int
    snippet: str
    view: str = "base"


@dataclass(frozen=True, slots=True)
class LexiconScan:
    """What the lexicon found.

    Attributes:
        scores: Category -> score (only categories that scored).
        reason: The strongest match, e.g. ``violence [threat-against-you]: 'i will kill you'``.
        evidence: The terms behind the scores, strongest first (view, original span).
    """

    scores: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    evidence: tuple[Evidence, ...] = ()


def _sentence(text: str, start: int, end: int) -> str:
    left, mark = sentence_bounds(text, start, end)
    return text[left:mark]


_SCAN = PatternTable([term.pattern for term in TERMS], group=RE2_GROUP)
# the idioms and the terms read by the same RE2 sets over each view (four of them,
# whatever the text's length: see ``idioms.RE2_GROUP``)
_JOINT = JointScan([idioms._SCAN, _SCAN], whole_max=0, group=RE2_GROUP)


def _view_matches(text: str, engine: Engine) -> tuple[str, list[tuple[int, re.Match[str]]]]:
    """``text`` with its idioms blanked, and the term matches in that: the same RE2
    sets tell which idioms and terms can match ``text`` (usually none); the terms are
    looked for again in the blanked text only when an idiom was found."""
    joint = _JOINT.candidates(text, engine=engine)
    if joint is None:
        masked = mask_idioms(text, engine=engine)
        return masked, _SCAN.matches(masked, engine=engine)
    data, (idiom_candidates, term_candidates) = joint
    if idiom_candidates:
        masked = idioms.masked(text, idioms._SCAN.verify(text, data, idiom_candidates))
        if masked is not text:
            return masked, _masked_matches(masked, engine)
    if not term_candidates:
        return text, []
    return text, _SCAN.verify(text, data, term_candidates)


def _masked_matches(masked: str, engine: Engine) -> list[tuple[int, re.Match[str]]]:
    """``_SCAN.matches(masked)``, its candidates from the joint sets: every text goes
    through those, so RE2 has built their DFA states, while the table's own sets only
    ever read texts with an idiom (the first long one cost ~2 ms of state building)."""
    joint = _JOINT.candidates(masked, engine=engine)
    if joint is None:
        return _SCAN.matches(masked, engine=engine)
    data, (_, term_candidates) = joint
    return _SCAN.verify(masked, data, term_candidates) if term_candidates else []


NEAR_REACH = 150
"""How far (characters, each side) a term's ``near`` context may be from it."""


def _hits(text: str, engine: Engine, pending: list[tuple[int, int]] | None = None,
          ) -> list[_Hit]:
    """Every term match in ``text``; with ``pending``, the spans of matches that only
    lack their ``near`` context (which text still to come could supply) go there."""
    hits: list[_Hit] = []
    for view in views_for_matching(text, deep=False, engine=engine):
        masked, found = _view_matches(view.text, engine)
        for index, m in found:
            term = TERMS[index]
            if term.near is not None and not term.near.search(
                    masked[max(0, m.start() - NEAR_REACH):m.end() + NEAR_REACH]):
                if pending is not None:
                    pending.append(view.span(m.start(), m.end()))
                continue
            start, end = view.span(m.start(), m.end())
            snippet = " ".join(m.group(0).split())
            for category, weight in term.weights:
                hits.append(_Hit(term.name, category, weight, start, end, snippet,
                                 view.name))
                if (category == "sexual" and weight >= _MINOR_CONTEXT
                        and _MINORS.search(_sentence(masked, m.start(), m.end()))):
                    hits.append(_Hit("sexual-content-with-minor", "sexual/minors", 0.95,
                                     start, end, snippet, view.name))
    return hits


def _noisy_or_independent(hits: list[_Hit]) -> float:
    kept: list[_Hit] = []
    for hit in sorted(hits, key=lambda h: h.weight, reverse=True):
        if not any(hit.start < k.end and k.start < hit.end for k in kept):
            kept.append(hit)
    miss = 1.0
    for hit in kept:
        miss *= 1.0 - hit.weight
    return 1.0 - miss


def score_text(text: str, categories: Iterable[str] = MODERATION_CATEGORIES, *,
               engine: Engine = DEFAULT_ENGINE) -> LexiconScan:
    """Score ``text`` per moderation category.

    Args:
        text: The text to check.
        categories: The categories to report (others are dropped after scoring, so a
            subcategory still lifts a requested parent).
        engine: ``"re2"`` (RE2 sets first, when built) or ``"re"``; the result is the
            same.
    """
    hits = _hits(text, engine)
    if not hits:
        return LexiconScan()
    best: dict[tuple[str, str], _Hit] = {}
    for hit in hits:
        key = (hit.term, hit.category)
        if key not in best or hit.weight > best[key].weight:
            best[key] = hit
    by_category: dict[str, list[_Hit]] = {}
    for hit in best.values():
        by_category.setdefault(hit.category, []).append(hit)
    scores = {c: _noisy_or_independent(hs) for c, hs in by_category.items()}
    for child, parent in PARENTS.items():
        if child in scores:
            scores[parent] = max(scores.get(parent, 0.0), scores[child])
    wanted = set(categories)
    scores = {c: round(s, 4) for c, s in scores.items() if c in wanted and s > 0}
    if not scores:
        return LexiconScan()
    top = max(scores, key=lambda c: scores[c])
    leader = max((h for h in best.values() if h.category == top or PARENTS.get(h.category) == top),
                 key=lambda h: h.weight)
    evidence = tuple(
        Evidence("rule", h.term, h.category, h.weight, h.view, h.start, h.end, h.snippet)
        for h in sorted(best.values(), key=lambda h: h.weight, reverse=True)[:20])
    return LexiconScan(scores, f"{top} [{leader.term}]: {leader.snippet!r}", evidence)


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def flagged_spans(text: str, categories: Iterable[str], threshold: float, *,
                  engine: Engine = DEFAULT_ENGINE) -> list[tuple[int, int]]:
    """The spans of ``text`` (merged, in order) of every term that reaches ``threshold``
    on its own in one of ``categories`` (a subcategory counts for its parent).

    What ``ModerationProcessor(strategy="redact")`` replaces: each span depends only on
    the text around it (the term, an idiom it may be part of, its ``near`` context),
    never on other terms elsewhere in the text, so a stream window sees the same spans
    as the whole text.
    """
    wanted = set(categories)
    return _merge((h.start, h.end) for h in _hits(text, engine)
                  if h.weight >= threshold
                  and (h.category in wanted or PARENTS.get(h.category) in wanted))


def term_spans(text: str, *, engine: Engine = DEFAULT_ENGINE,
               ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``(matches, pending)``: the spans of every term match in ``text``, and of the
    matches that still lack their ``near`` context."""
    pending: list[tuple[int, int]] = []
    hits = _hits(text, engine, pending)
    return [(h.start, h.end) for h in hits], pending
