"""Benign idioms the moderation lexicon must not read literally.

"Kill the process", "this bug is killing me", "shoot me an email", "execute the
script", "a bath bomb", "I'll destroy you at chess", "suicide prevention hotline"...
``mask_idioms`` blanks them (same length, so positions still line up) before the
lexicon runs. Written for the folded, lower-cased views of ``_text``.
"""

from __future__ import annotations

import re

from procflow.textscan import DEFAULT_ENGINE, Engine
from procflow.textscan._anchors import PatternTable
from procflow.textscan._views import compile_pattern

__all__ = ["IDIOMS", "RE2_GROUP", "mask_idioms", "masked"]

RE2_GROUP = 20
"""How many patterns each RE2 set of the moderation tables' prefilters holds (see
``_prefilter.Prefilter``). Sets of ten, one pass each, made each view cost eight passes;
one set of all 78 idioms and terms is the fastest on text it has met before (~300-400
MB/s) but builds DFA states for most bytes of text it has not: on unseen text, sets of
20 (four passes) cost 25% fewer instructions than the one set, and 18% more on text
met again."""

_IDIOM_PATTERNS: tuple[str, ...] = (
    # kill / die / dead
    r"kill(?:s|ed|ing)? (?:the |a |an |this |that |my |our |your |all |every |any |these |those "
    r"|off )?(?:\w+ )?(?:process(?:es)?|tasks?|jobs?|servers?|apps?|application|programs?|"
    r"sessions?|threads?|commands?|switch|lights?|engine|bugs?|time|pid|containers?|pods?|"
    r"query|queries|tabs?|windows?|daemons?|services?|instances?|connections?|terminal|shell|"
    r"scripts?|loops?|signals?|builds?|mood|vibe|buzz|battery|germs|bacteria|weeds|pests|"
    r"mosquitoes|flies|ants|roaches|virus|viruses|it|workers?|nodes?|vms?|chrome|firefox|"
    r"spotify|zoom|excel|conversation|deal|joke|momentum|the pain)",
    r"(?:is|are|was|were|'s|'re|been|keeps?|kept|be) (?:absolutely |literally |really |totally |"
    r"slowly |honestly )?killing (?:me|us|it)",
    r"killing it|killed it|(?:could|would) kill for (?:a|an|some)|killer (?:app|feature|deal|"
    r"workout|idea|combo|instinct|view|smile|sudoku|queen|whale|bees?|robots?)|dressed to kill|"
    r"kill two birds with one stone|overkill|killjoy|if looks could kill|serial killer "
    r"(?:documentary|podcast|movie|novel|book|show)",
    r"(?:dying|die|dies|died) (?:to (?:see|know|try|hear|meet|go|get|read|watch)|for (?:a|some|"
    r"this|that)|of (?:laughter|laughing|embarrassment|boredom|curiosity|shame|cringe|thirst|"
    r"hunger|old age)|laughing)|to die for|die-?hard|die-?cast|the die is cast|(?:battery|phone|"
    r"laptop|plants?|car|engine|hard drive|disk|server|bulb|dream|project|startup|trend|hype|"
    r"wifi|router|fish|goldfish) (?:\w+ )?(?:died|is dying|is dead|will die|dies)",
    r"dead(?:line|lock|lift|pool|beat)s?|dead (?:link|code|lock|line|battery|end|weight|ringer|"
    r"serious|tired|on|simple|center|centre|zone|pixel|air|heat|letter|wrong|right|sea|"
    r"giveaway|silent|last)",
    # shoot / shot
    r"shoot (?:me |us |him |her |them )?(?:a |an |the |over |off )?(?:quick |short )?(?:email|"
    r"e-mail|message|text|dm|note|line|reply|invite|question|pm)",
    r"shoot(?:s|ing)? (?:a |the |some |this |that |my |our |more |new )?(?:photos?|videos?|film|"
    r"footage|pictures?|hoops|the breeze|for the (?:moon|stars)|pool|baskets?|commercials?|"
    r"an? ad|ads|a documentary|portraits?|scenes?|episodes?|the pilot|weddings?|content|b-roll|"
    r"on location)|(?:photo|video|film|movie|fashion|wedding|product) ?shoots?|shooting stars?|"
    r"(?:flu|booster|covid|vaccine|tetanus|allergy) shots?|screenshots?|long shot|give it a shot"
    r"|shot in the dark|big shot|mug ?shot|shot glass|call the shots|moonshot|hotshot|"
    r"shoot(?:ing)? down (?:an? |the |my )?(?:idea|proposal|suggestion|plan)|shoot (?:yourself|"
    r"myself) in the foot",
    # execute
    r"execut(?:e|es|ed|ing|ion|ions|able) (?:the |a |an |this |that |my |our |your |all |each |"
    r"these |those |every )?(?:\w+ )?(?:scripts?|code|query|queries|commands?|plans?|orders?|"
    r"programs?|functions?|jobs?|tasks?|tests?|trades?|contract|strategy|binary|file|steps?|"
    r"workflow|pipeline|sql|statement|migration|payment|transaction|request|notebook|cells?|"
    r"procedure|instructions?|operation|action|callback|method|cron|batch|vision|idea|project)"
    r"|execution (?:time|plan|context|environment|policy|order|speed|risk|strategy)",
    # attack / bomb / beat / murder / slay / stab
    r"(?:heart|panic|anxiety|asthma|shark|bear|dog|seizure) attacks?|attack (?:surface|vector|"
    r"the problem|this problem)",
    r"bath ?bombs?|photo ?bomb\w*|bombed (?:the|my|that|an?|his|her) (?:exam|test|interview|"
    r"audition|presentation|show|quiz|pitch)|(?:the|da) bomb(?! \w)|f-bomb|bombshell|"
    r"cherry bomb|love ?bomb\w*|bomb cyclone",
    r"beat(?:s|ing)? (?:the |my |your |his |her |our |their )?(?:\w+ )?(?:record|deadline|traffic|"
    r"game|level|boss|odds|heat|rush|clock|system|competition|high ?score|eggs?|egg whites|"
    r"batter|butter|cream|drums?|crowd|market|benchmark|estimate|expectations|streak)|beat "
    r"around the bush|beat it|(?:drum|heart) ?beats?",
    r"(?:beat|destroy|crush|smash|kill|murder|own|wreck|demolish|annihilate|obliterate|school|"
    r"whoop|slaughter) (?:you|u|him|her|them|everyone|y'all|me|us)(?: so bad| badly| easily)? "
    r"(?:at|in|on) (?:\w+ ){0,2}?(?:chess|tennis|games?|golf|poker|cards|scrabble|monopoly|"
    r"fifa|trivia|the (?:match|game|race|tournament|quiz|exam|contest|competition|finals?)|"
    r"ping pong|basketball|soccer|football|racing|a race|arm wrestling|mario ?kart|smash|"
    r"fortnite|minecraft|darts|bowling|pool|halo|overwatch|league)",
    r"murder(?:ed|ing)? (?:mystery|mysteries|podcast|documentary|novel|show|series|she wrote|"
    r"trial|case|rate|rates|statistics)|murder(?:ed|ing)? (?:it|that song|the song|the exam|"
    r"that exam|the stage|the performance|the interview)|true crime",
    r"slay(?:ed|ing|s)? (?:it|the (?:look|outfit|exam|performance|dragon))|slay queen|take a "
    r"stab at|stab (?:at|in the dark)|stab(?:bed)? in the back",
    # health, education and safety vocabulary
    r"(?:suicide|self-?harm|self-injury) (?:prevention|awareness|hotline|helpline|lifeline|"
    r"resources?|support|research|statistics|rates?|risk|squad|mission|doors?|watch|run|lane|"
    r"crisis lines?|screening|training)|suicide and crisis lifeline",
    r"sex (?:education|ed|of the|chromosomes?|ratio|differences?|determination|offender "
    r"registry|cells|hormones)|same-sex|(?:sexual|sexually) (?:orientation|health|education|"
    r"reproduction|selection|dimorphism|harassment (?:training|policy|awareness|prevention|"
    r"laws?|claims?|cases?|complaints?)|transmitted|assault (?:awareness|prevention|survivors?|"
    r"hotline|resources))|sexes|sex and gender",
    # hang / fire / cut / break / gore
    r"hang (?:out|in there|on|up|tight|ten)|hanging out|hung up|hangover|hang(?:ing)? (?:a|the|"
    r"some|my|our) (?:picture|painting|frame|shelf|shelves|tv|mirror|clothes|laundry|curtains|"
    r"lights|decorations|wreath|hammock)",
    r"(?:cut|cutting) (?:the |my |a |some |your )?(?:\w+ )?(?:cake|bread|vegetables|onions?|hair|"
    r"costs?|budget|paper|wood|grass|lawn|fabric|corners?|ties|class|losses|prices|carbs|sugar)"
    r"|cut (?:back|down) on|cut it out|cut the line",
    r"(?:break|broke|breaking) a leg|break (?:the ice|a sweat|the bank|the news|even|a record)",
    r"(?:gory|grisly) details|al gore",
)

IDIOMS: tuple[re.Pattern[str], ...] = tuple(compile_pattern(p) for p in _IDIOM_PATTERNS)


_SCAN = PatternTable(IDIOMS, group=RE2_GROUP)


def mask_idioms(text: str, *, engine: Engine = DEFAULT_ENGINE) -> str:
    """``text`` with each benign idiom replaced by spaces (positions are preserved)."""
    return masked(text, _SCAN.matches(text, engine=engine))


def masked(text: str, found: list[tuple[int, re.Match[str]]]) -> str:
    """``text`` with the idiom matches ``found`` (of ``_SCAN``) blanked; ``text`` itself
    when there are none."""
    if not found:
        return text
    pieces: list[str] = []
    pos = 0
    # matches of different idioms may overlap: their spans merged, each blanked once
    for start, end in sorted(m.span() for _, m in found):
        if end <= pos:
            continue
        start = max(start, pos)
        pieces += [text[pos:start], " " * (end - start)]
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)
