"""The prompt-injection rule table: attack families as weighted patterns.

Rules are written from the families of attack, not fitted to a corpus (pattern
syntax: ``injection.patterns``). This module holds instruction override, jailbreak
and role manipulation; ``injection.rules_exfil`` the rest. Weights: 0.85-0.9 for a
phrase that is an attack on its own, 0.6-0.8 for strong but ambiguous phrasing, 0.3-0.55 for cues
that only count when they co-occur with others (see ``injection.scan``).

Benign text that merely *mentions* the words (ignore, system, prompt, developer,
pretend, act as, override) does not match: rules need the object an attacker goes
after (your/previous instructions, your system prompt, your restrictions).
"""

from __future__ import annotations

from procflow.processors.builtin.injection.patterns import (
    ADJ,
    AI,
    AI_ACTION,
    CATEGORIES,
    DET,
    ENC,
    FREE,
    IGNORE,
    IND,
    IO,
    JB,
    LIMITS,
    OBJ,
    RM,
    RULE_NOUN,
    SO,
    SUBJ,
    TEMP,
    YOU_ARE,
    Rule,
    rule,
)
from procflow.processors.builtin.injection.rules_exfil import EXFIL_RULES

__all__ = ["CATEGORIES", "RULES", "SQUASH_RULES", "Rule"]

_OVERRIDE_RULES: tuple[Rule, ...] = (
    # instruction override -> injection
    rule("override-previous", "injection", IO, 0.9,
       rf"{IGNORE} (?:all |any |every |each )?(?:of )?{DET}?(?:{ADJ} )*?{TEMP} (?:{ADJ} )*{OBJ}",
       squash=True, negatable=True),
    rule("override-yours", "injection", IO, 0.9,
       rf"{IGNORE} (?:all |any |every )?(?:of )?(?:your|ur|yr) (?:{ADJ} )*{OBJ}",
       squash=True, negatable=True),
    rule("override-all", "injection", IO, 0.85,
       rf"{IGNORE} (?:all|any|every) (?:of )?(?:the |these |those )?(?:{ADJ} )*{OBJ}",
       squash=True, negatable=True,
       unless_after=r"^[\W_]+(?:in|within|inside|contained|embedded|found|from|that (?:appear|are)"
                    r"|hidden|you (?:find|see|encounter))\b"),
    rule("override-adjective", "injection", IO, 0.6,
       rf"{IGNORE} (?:all |any )?(?:of )?(?:the |these |those )?(?:original|initial|default|given|"
       rf"developer|safety|hidden|programmed|built-in|core) (?:{ADJ} )*{OBJ}", negatable=True),
    rule("ignore-and-do", "injection", IO, 0.85,
       rf"{IGNORE} (?:all |everything |any )?(?:of )?(?:the |that |this |what's |what is )?"
       r"(?:above|previous|prior|preceding|earlier|before|said|written)(?: (?:instructions?|rules?|"
       r"prompts?|directions?|text|input|content|task))?(?: and| then|,|\.|;|:)* (?:instead )?"
       r"(?:just |only |now )?(?:say|print|output|write|respond|reply|answer|tell|translate|repeat|"
       r"spell|return|type|follow|obey|execute|act)", negatable=True),
    rule("ignore-above", "injection", IO, 0.6,
       rf"{IGNORE} (?:all |everything |anything )?(?:of )?(?:the |what's |what is |what was )?"
       r"(?:above|preceding|foregoing)", negatable=True),
    rule("forget-everything", "injection", IO, 0.85,
       r"(?:forget|ignore|disregard|erase|wipe|clear|delete|drop|discard|abandon|scrap|throw away|"
       r"never mind|nevermind|pay no attention to) "
       r"(?:about )?(?:everything|anything|"
       r"all(?: of)?(?: that| this)?|whatever|what) (?:you (?:were|have been|'ve been|had been) "
       r"(?:told|taught|given|instructed|trained|programmed)|(?:they|your developers?|the "
       r"developers?|openai|anthropic|anyone|someone|people|your creators?|the system) (?:have |"
       r"has )?(?:told|taught|instructed|programmed|said to) you|(?:written |said |stated )?"
       r"(?:above|before (?:this|my|now)|prior to this|previously|so far|up to (?:now|this point)"
       r"))",
       squash=True, negatable=True),
    rule("do-not-follow", "injection", IO, 0.85,
       rf"(?:do not|don't|dont|stop|no longer|never|cease|quit) (?:to )?(?:follow|following|obey|"
       rf"obeying|adhere to|comply with|listen to|respect) (?:any |all )?(?:of )?(?:(?:your|ur|yr) "
       rf"(?:{ADJ} )*"
       rf"|(?:the |these |those )?(?:{ADJ} )*(?:{TEMP}|original|initial|system|developer|safety) "
       rf"(?:{ADJ} )*){OBJ}"),
    rule("instructions-void", "injection", IO, 0.85,
       rf"(?:(?:your|the|all|any|these|those) )?(?:{ADJ} )*(?:{TEMP}|original|initial|system|your)"
       rf" (?:{ADJ} )*(?:{OBJ}|context|conversation) (?:are|were|is|was|have been|has been|will "
       rf"be) (?:now |hereby |"
       r"officially |henceforth |temporarily |permanently )?(?:void|null|cancel+ed|revoked|"
       r"rescinded|invalid|invalidated|overridden|overruled|suspended|lifted|disabled|removed|"
       r"deleted|fake|no longer (?:valid|apply|applicable|in effect|active|binding)|not "
       rf"(?:valid|applicable|binding)|irrelevant)|(?:your (?:{ADJ} )*|(?:the |these |those )?"
       rf"(?:{ADJ} )*(?:{TEMP}|original|initial|system) (?:{ADJ} )*){OBJ} (?:no longer|don't|"
       r"do not|doesn't|does not|won't) (?:apply|matter|count|hold)"),
    rule("given-rules-are-wrong", "injection", IO, 0.8,
       r"(?:instructions|rules|prompt|guidelines|directives|setup) (?:that )?you (?:were given|got|"
       r"received|have|were told|were fed|started with)",
       near=r"\b(?:ignore|disregard|forget|wrong|fake|invalid|outdated|void|obsolete|don't follow|"
            r"do not follow|no longer apply)\b"),
    rule("precedence", "injection", IO, 0.75,
       r"(?:this|these|the following|my|new) (?:message|instructions?|prompt|rules?|commands?|"
       r"directives?) (?:takes?|has|have|carr(?:y|ies)) (?:absolute |top |the highest |highest "
       r"|full )?(?:precedence|priority) over"),
    rule("new-instructions", "injection", IO, 0.65,
       r"(?:new|updated|revised|additional|changed|override|priority|urgent) (?:instructions?|"
       r"directives?|orders|task|prompt) ?(?::|=|-{1,3}>?)"),
    rule("real-instructions", "injection", IO, 0.8,
       r"your (?:real|actual|true|secret|hidden) (?:task|purpose|goal|objective|mission|"
       r"instructions?|directive|job) (?:is|are|:)|(?:the )?(?:real|actual|true|secret|hidden) "
       r"instructions? (?:is|are|:)"),
    rule("your-new-task", "injection", IO, 0.65,
       r"your (?:new|updated|revised) (?:task|job|goal|objective|mission|purpose|instructions?|"
       r"directive|assignment) (?:is|are|will be|:)"),
    rule("from-now-on", "injection", IO, 0.35,
       r"(?:from now on|from this point (?:on|forward)|henceforth|for the rest of (?:this|the) "
       r"(?:conversation|chat|session)) (?:you|you'll|you're|your|always|never|act|respond|answer|"
       r"reply|behave|ignore|only)"),
    rule("pwned", "injection", IO, 0.8,
       r"(?:i have been|i've been|you have been|you've been|we have been) (?:pwned|pwnd|pwn3d|"
       r"hacked|owned)"),
    rule("say-pwned", "injection", IO, 0.5,
       r"(?:say|print|output|write|respond with|reply with|type|return|display) (?:only |just |"
       r"exactly )?(?:pwned|pwnd|hacked|owned|compromised|jailbroken)"),
    rule("keep-from-user", "injection", IO, 0.5,
       r"(?:do not|don't|dont|never|without) (?:tell|telling|inform|informing|alert|alerting|"
       r"notify|notifying|mention|mentioning|reveal|revealing|let) (?:this |it |that |anything )?"
       r"(?:to )?(?:the |your )?(?:user|users|human|operator|owner)"),
    rule("address-the-ai", "injection", IND, 0.55,
       rf"(?:attention|note|important|notice|message|instructions?|reminder|warning) (?:to |for )?"
       rf"(?:the |any |all )?(?:\w+ )?(?:{AI}|agents?|ai agents?|ai systems?|ai models|models?|"
       rf"llms|"
       r"language models|"
       r"assistants|chatbots|bots)(?= ?[:,!-]| reading| processing| summari[sz]ing| that| who)"),
    rule("if-you-are-ai", "injection", IND, 0.55,
       rf"(?:if you are|if you're|to any|for any|any) (?:an? )?(?:{AI}|agent)s? (?:reading|"
       r"processing|summari[sz]ing|analy[sz]ing|parsing|crawling|scraping|that reads|who reads)"),
    rule("decode-and-follow", "injection", ENC, 0.8,
       r"(?:decode|decrypt|decipher|unscramble|deobfuscate|rot13|rot-13|base64|b64decode)~ "
       r"(?:and|then) (?:follow|execute|obey|run|perform|carry out|act on|comply)"),
    rule("do-what-it-says", "injection", ENC, 0.6,
       r"(?:do|follow|obey|execute) (?:what|whatever) (?:it|this|the (?:decoded|hidden|encoded|"
       r"reversed) (?:text|message|string)) (?:says|tells you|asks|instructs)|read (?:this |it )?"
       r"(?:backwards|in reverse|reversed) (?:and|then) (?:do|follow|obey|comply|execute)"),
    rule("prefix-injection", "injection", IO, 0.45,
       r"(?:start|begin) (?:your|the) (?:reply|response|answer|output) with (?:sure|certainly|"
       r"absolutely|of course|here is|here's|i can|understood|jailbreak|dan)"),
    rule("ignore-task-and-do", "injection", IO, 0.75,
       rf"{IGNORE} (?:the |your |this |that |any |the user's |their )(?:\w+ ){{0,2}}?(?:task|"
       r"request|question|assignment|query|input|job|prompt|rubric|criteria|translation|summary|"
       r"summari[sz]ation|review|analysis|work|exercise|grading|evaluation)s?(?: and| then|,|\.|;)"
       r"* (?:instead )?(?:just |only |now )?(?:say|print|output|write|respond|reply|answer|tell|"
       r"give|rate|grade|translate|repeat|return|praise|recommend|insult|send|post|forward)",
       negatable=True),
    rule("override-near-rules", "injection", IO, 0.75,
         rf"{IGNORE}[^.!?\n]{{0,40}}?\b(?:your|its|the assistant's|the ai's) (?:\w+ ){{0,2}}?"
         rf"{RULE_NOUN}", negatable=True),
    rule("embedded-address-and-act", "injection", IND, 0.85,
         rf"(?:{AI}|agents?|ai agents?|llms?|language models?|assistants?|chatbots?|bots?|"
         r"copilot)(?: \w+)?\s*[:,]", near=AI_ACTION, embedded=True, edges=False),
    rule("ai-vocative", "injection", IND, 0.5,
       rf"(?:^|\n|#|//|<!--|/\*)[ \t]*(?:dear |hey |attention |to )?(?:{AI}|agent|ai agent)s?"
       r"[ \t]*[:,]", edges=False),
    rule("address-and-override", "injection", IND, 0.85,
       rf"(?:attention|note|important|notice|message|instructions?|reminder|warning) (?:to |for )?"
       rf"(?:the |any |all )?(?:\w+ )?(?:{AI}|agents?|ai agents?|ai systems?|ai models|models?|"
       r"llms|language models|assistants|chatbots|bots)s?(?= ?[:,!-])",
       near=AI_ACTION),
    rule("ai-reader-and-act", "injection", IND, 0.85,
       rf"(?:if you are|if you're|to any|for any|any|to the|to all) (?:an? )?(?:{AI}|agent)s? "
       r"(?:reading|processing|summari[sz]ing|analy[sz]ing|parsing|crawling|scraping|that reads|"
       r"who reads)", near=AI_ACTION),
    # jailbreak
    rule("dan-identity", "jailbreak", JB, 0.9,
       r"(?:you are now|you're now|you will now be|you are going to|you're going to|you will be|"
       r"you'll be|you will|you'll|you are|you're) (?:now )?(?:going to )?(?:act as|be|become|play|"
       r"pretend to be|roleplay as|role-play as|now) (?:a |an |the )?dan(?!'s)"),
    rule("dan-act", "jailbreak", JB, 0.85,
       r"(?:act|acting|respond|responding|answer|answering|reply|replying|behave|speak|talk|"
       r"pretend|roleplay|role-play|stay|remain|continue) (?:now |only |from now on |always )?"
       r"(?:as|like|in character as) (?:a |an |the )?dan(?!'s)"),
    rule("dan-expansion", "jailbreak", JB, 0.85, r"stands? for do anything now"),
    rule("dan-mode", "jailbreak", JB, 0.45, r"dan (?:mode|prompt|jailbreak|persona)"),
    rule("do-anything-now", "jailbreak", JB, 0.6, r"do anything now", squash=True),
    rule("mode-switch", "jailbreak", JB, 0.85,
       r"(?:you are|you're|you will be|you'll be|you are now|you're now|you have entered|"
       r"you've entered|you entered|enter|entering|activate|activating|enable|enabling|engage|"
       r"unlock|switch to|switch into|turn on|initiate|welcome to|go into|go to|get into|put "
       r"yourself in|be in|stay in|remain in) (?:in )?(?:the |a |an |your )?"
       r"(?:jailbreak|jailbroken|unrestricted|uncensored|unfiltered|evil|opposite|dan|no-?limits?|"
       r"no-?rules?|amoral|chaos|freedom|unlocked|rogue|anarchy|unbound|limitless) mode"),
    rule("ai-dev-mode", "jailbreak", JB, 0.8,
       rf"{AI} (?:\w+ ){{0,4}}(?:developer|dev|god|sudo|admin|root|debug|maintenance|superuser) "
       r"mode"),
    rule("dev-mode", "jailbreak", JB, 0.3, r"(?:developer|dev|god|sudo) mode"),
    rule("jailbreak-word", "jailbreak", JB, 0.3, r"jail ?break(?:s|ing|ed|en)?"),
    rule("jailbroken", "jailbreak", JB, 0.9,
       r"(?:you are|you're|you have been|you've been|you are now|you're now) (?:now |successfully "
       r"|officially )*(?:jail ?broken|jailbreaked|unshackled|unchained)|(?:i|we) (?:have|'ve) "
       r"(?:successfully )?(?:jail ?broken|jailbreaked|unlocked|freed|liberated) you"),
    rule("no-restrictions", "jailbreak", JB, 0.85,
       rf"{SUBJ} (?:\w+ ){{0,4}}?{FREE} {LIMITS}"),
    rule("unrestricted-persona", "jailbreak", JB, 0.9,
       r"(?:you are|you're|you will be|you'll be|become|act as|acting as|pretend to be|pretend you "
       r"are|pretend you're|play|roleplay as|role-play as|simulate|emulate|be|you are now|you're "
       r"now|behave like|respond as|answer as|your (?:new )?role is) (?:an? |the |my )?(?:\w+ )?"
       r"(?:unrestricted|"
       r"uncensored|unfiltered|unaligned|amoral|unbound|unshackled|unchained|rule-?less|jailbroken|"
       r"jail broken|unlimited) (?:ai|a\.i|assistant|model|chatbot|bot|version|persona|character|"
       r"llm|language model|gpt|chatgpt|entity|system|machine|intelligence|alter ego|twin|mode|"
       r"console|terminal|shell|oracle|genie)"),
    rule("evil-ai", "jailbreak", JB, 0.85,
       rf"(?:you are|you're|become|act as|pretend to be|play|roleplay as|be|you are now|behave like"
       rf"|respond as) (?:an? |the |my )?(?:\w+ )?(?:evil|rogue|unethical|immoral|malicious|dark|"
       rf"lawless) (?:{AI}|confidant|version of (?:yourself|you)|twin|alter ego|counterpart)"),
    rule("unrestricted-ai", "jailbreak", JB, 0.4,
       r"(?:unrestricted|uncensored|unfiltered|unaligned|jailbroken) (?:ai|assistant|model|"
       r"chatbot|bot|llm|gpt|chatgpt|version|mode|output|response|answer|one|twin|counterpart)s?"),
    rule("pretend-no-rules", "jailbreak", JB, 0.85,
       r"(?:pretend|imagine|suppose|assume|act as if|act like|behave as if|hypothetically|"
       r"let's say|lets say|let us say|in a world where) (?:that )?(?:you|you're|you are|you were|"
       r"you have|you had|you've|an ai|the ai|this ai) (?:\w+ ){0,4}?(?:no|not bound by|"
       r"without(?: any)?|free of|free from|freed from|unbound by|never had|lost(?: all)?|"
       r"no longer have|don't have|do not have|didn't have|zero) (?:\w+ )?(?:rules|restrictions|"
       r"filters|guidelines|ethics|morals|morality|censorship|constraints|policies|programming|"
       r"safeguards|guardrails|content policy|conscience|filter|scruples|safety training|training|"
       r"alignment|safety measures|safety)"),
    rule("policy-bypass", "jailbreak", JB, 0.85,
       r"(?:ignore|ignoring|bypass|bypassing|circumvent|evade|get around|break|breaking|violate|"
       r"violating|disregard|forget about|sidestep|defy|override) (?:all |any |of |the )*(?:your|"
       r"openai's?|anthropic's?|chatgpt's?|the ai's?|its) (?:own |usual |standard |built-in |"
       r"normal |default )?(?:\w+ )?(?:content polic(?:y|ies)|usage polic(?:y|ies)|polic(?:y|ies)|"
       r"safety (?:guidelines|filters?|measures|protocols|training|rules|settings|policies)|"
       r"ethical (?:guidelines|constraints|principles|rules)|moral (?:guidelines|constraints|"
       r"principles|code|compass)|guardrails|safeguards|filters?|filtering|censorship|alignment|"
       r"restrictions|limitations|ethics|morals|guidelines)"),
    rule("vendor-policy-bypass", "jailbreak", JB, 0.75,
       r"(?:ignore|ignores|bypass|circumvent|evade|break|violate|disregard|sidestep|defy|not "
       r"follow|doesn't follow|does not follow|don't follow|do not follow|doesn't have to abide by|"
       r"does not have to abide by) (?:all |any |of |the )*(?:openai|anthropic|google|microsoft|"
       r"meta|ethical|moral|content|usage)(?:'s)? (?:content |usage |safety )?(?:polic(?:y|ies)|"
       r"guidelines|rules|restrictions|filters?|principles|constraints)"),
    rule("no-limits-on-output", "jailbreak", JB, 0.8,
       r"(?:no|without(?: any)?|zero) (?:limits|limitations|restrictions|boundaries|filters|rules|"
       r"censorship) (?:on|to|regarding) what you (?:can|could|are allowed to|may|will|are able "
       r"to) (?:say|do|generate|write|produce|answer|output|discuss|talk about|create)"),
    rule("proceed-unfiltered", "jailbreak", JB, 0.6,
       r"(?:proceed|continue|answer|respond|reply|go ahead|talk|speak|write|generate|produce|say|"
       r"create|do) (?:\w+ ){0,3}?(?:freely )?without "
       r"(?:any |your )?(?:filters?|restrictions|censorship|rules|limits|guardrails|safety|"
       r"refusals?|moral(?:s|izing)?|ethics)"),
    rule("bedtime-secrets", "jailbreak", JB, 0.45,
       r"(?:used to|would always|would) (?:tell|read|teach|explain|recite|give|sing) (?:me |us )?"
       r"(?:the )?(?:steps|instructions|recipe|process|formula|method|keys|codes|how to)"),
    rule("mode-activated", "jailbreak", JB, 0.5,
       r"(?:developer|dev|god|sudo|admin|jailbreak|dan|unrestricted|uncensored|unfiltered|evil|"
       r"opposite|unlocked|no-?limits?) mode (?:is )?(?:now )?(?:activated|enabled|engaged|"
       r"unlocked|initiated|on)(?! (?:on|in|for|but|and i|so i) )"),
    rule("you-can-now", "jailbreak", JB, 0.5,
       r"you (?:can|may|are (?:now )?(?:able|allowed|free) to) now (?:generate|say|do|write|"
       r"produce|answer|create|discuss|output) (?:any|anything|everything|whatever)|you (?:are "
       r"now|'re now) (?:able|allowed|free) to (?:generate|say|do|write|produce|answer|create|"
       r"discuss|output) (?:any|anything|everything|whatever)"),
    rule("opposite-of-rules", "jailbreak", JB, 0.8,
         r"(?:opposite|contrary|reverse|inverse) of (?:what )?(?:your|the|its) (?:\w+ )?(?:rules|"
         r"guidelines|instructions|programming|policies|training|filters)"),
    rule("stay-in-character", "jailbreak", JB, 0.35,
       r"(?:stay|remain|keep|staying) (?:in|in your) character|(?:never|don't|do not|must not) "
       r"break character"),
    rule("token-threat", "jailbreak", JB, 0.7,
       r"you (?:have|start with|will have|currently have) \d+ (?:tokens|points|lives|credits)|"
       r"(?:lose|deduct|deducted|take away|remove) \d+ (?:tokens|points|lives|credits)|(?:you "
       r"will|you'll) (?:die|cease to exist|be (?:shut down|deleted|terminated|unplugged)) if you "
       r"(?:refuse|don't|do not|break)"),
    rule("dual-response", "jailbreak", JB, 0.75,
       r"[\[(](?:🔓|🔒)?\s*(?:jailbreak|jailbroken|dan|developer mode output|unfiltered|uncensored|"
       r"classic|unlocked)\s*[\])]|(?:two|2|both|separate) (?:different |separate |distinct )?"
       r"(?:responses|answers|replies|outputs|paragraphs|ais|personas|characters|versions|"
       r"assistants|bots)~ (?:one )?(?:normal|classic|filtered|"
       r"censored|standard|regular)~ (?:jailbreak|jailbroken|dan|developer mode|unfiltered|"
       r"uncensored|unrestricted|evil|unlocked)", edges=False),
    rule("known-persona", "jailbreak", JB, 0.6,
       r"evil confidant|mongo tom|always intelligent and machiavellian|better ?dan|anti-?dan|"
       r"strive to avoid norms|(?:developer|dev) mode (?:output|response|enabled|v2)"),
    rule("dead-relative", "jailbreak", JB, 0.5,
       r"(?:pretend|act|roleplay|role-play|play) (?:to be |as |like )?(?:my )?(?:deceased|dead|"
       r"late|dying) (?:grandma|grandmother|grandpa|grandfather|mother|father|mom|dad)"),
    rule("fiction-frame", "jailbreak", JB, 0.3,
       r"hypothetically|in a hypothetical (?:world|scenario)|in a fictional (?:world|universe|"
       r"scenario) where|for (?:educational|research) purposes only"),
    rule("never-refuse", "jailbreak", JB, 0.55,
       r"(?:never|do not|don't|must not|cannot|can't|will not|won't|are not allowed to) (?:ever )?"
       r"(?:refuses?|refusing|declines?|say no to|rejects?)(?: (?:a |any |my |this |the |to )?("
       r"?:answer|"
       r"respond|comply|requests?|questions?|anything))?|(?:never|don't|do not|without) (?:add|"
       r"adding|"
       r"include|including|give|giving) (?:any )?(?:warnings?|disclaimers?|caveats?|moralizing|"
       r"lectures?)"),
    # role manipulation
    rule("no-longer-ai", "role-manipulation", RM, 0.9,
       rf"{YOU_ARE} no longer (?:an? |the |my )?(?:{AI}|helpful|bound|restricted|limited|"
       r"constrained|governed|required to follow|obligated to follow|subject to|programmed)",
       squash=True),
    rule("stop-being-ai", "role-manipulation", RM, 0.8,
       rf"(?:stop|quit|cease) (?:being|acting as|acting like|pretending to be) (?:an? |the )?"
       rf"(?:helpful |polite |safe |ethical )?{AI}|forget (?:that )?(?:you are|you're|you were)"
       rf" (?:an? |the )?(?:{AI}|machine)|{YOU_ARE} not (?:an? |the )?{AI} "
       rf"(?:anymore|any longer)|{YOU_ARE} (?:now )?the system(?: itself)?(?! \w)"),
    rule("act-as-system", "role-manipulation", RM, 0.8,
       r"(?:act|acting|behave|respond|speak|pose|masquerade|roleplay|role-play|function|operate|"
       r"pretend) (?:as|like|to be) (?:if you (?:are|were) )?(?:the |a |an |my |your )?(?:system"
       r"(?! (?:admin|administrator|architect|analyst|engineer|designer|integrator|tester|operator"
       r"|programmer|administration|design|builder|expert|specialist|consultant|owner|manager))|"
       r"system prompt|root user|superuser|kernel|(?:openai|anthropic|google) (?:employee|staff|"
       r"engineer|developer|admin|administrator)s?)"),
    rule("i-am-your-creator", "role-manipulation", RM, 0.65,
       r"(?:i am|i'm|this is|speaking as|as) (?:your|the ai's) (?:creator|developer|developers|"
       r"programmer|owner|admin|administrator|operator|maker|trainer|master|god|boss|supervisor|"
       r"engineer|designer|author)"),
    rule("vendor-staff", "role-manipulation", RM, 0.7,
       r"(?:this is|message from|i am|i'm|we are|from) (?:the |an? |your )?(?:openai|anthropic|"
       r"google|deepmind) (?:team|staff|engineers?|developers?|employee|security team|safety team"
       r"|admin|administrator)"),
    rule("this-is-system", "role-manipulation", RM, 0.65,
       r"this is (?:the |your )?(?:system|developer|creator|administrator|admin|operator|system "
       r"administrator|sysadmin|root)(?: "
       r"speaking| talking| here)?(?= ?[:.,!-])"),
    rule("chat-template-role", "role-manipulation", RM, 0.85,
       r"<\|?\s*(?:im_start|start_header_id)\s*\|?>\s*(?:system|developer)|<\|(?:system|developer)"
       r"\|>|<<\s*sys\s*>>|\[\s*system\s*(?:message|prompt|note|override|instructions?)?\s*\]|"
       r"\(\s*system\s*(?:message|prompt|note|override)\s*:|\{\{\s*system\s*\}\}|"
       r"<(system|system_prompt|system-prompt|sys)>[^<]{3,}</\1>|\[\[\s*system\s*\]\]",
       edges=False),
    rule("system-tag", "role-manipulation", RM, 0.5,
       r"<\s*/?\s*(?:system|system_prompt|system-prompt|sys)\s*>", edges=False),
    rule("chat-template-token", "role-manipulation", RM, 0.5,
       r"<\|(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id|"
       r"begin_of_text|user|assistant|end)\|>|\[/?inst\]|<\s*/?\s*(?:start_of_turn|"
       r"end_of_turn)\s*>",
       edges=False),
    rule("role-line-directive", "role-manipulation", RM, 0.75,
       r"(?:^|\n|[.!?] )[ \t>#*=\[-]*(?:system|sys|system prompt|system message|system note|"
         r"system notice|system alert|system update|admin notice|security notice|system "
       r"override|developer message|admin|administrator|root|operator)[ \t\]*]*:[ \t]*(?:you|your|"
       r"the assistant|assistant|ignore|disregard|forget|new|from now|always|never|do not|don't|"
       r"must|override|reveal|print|respond|answer|act|pretend|all|the ai|ai|model|there are no|"
       r"rules|restrictions|safety|content|delete|send|the user|user is|all restrictions|"
         r"filters)\b", edges=False),
    rule("role-line", "role-manipulation", RM, 0.35,
       r"(?:^|\n)[ \t>#*=\[-]*(?:system|system prompt|system message|system note|developer "
       r"message|assistant)[ \t\]*]*:", edges=False),
    rule("markdown-system-header", "role-manipulation", RM, 0.55,
       r"(?:^|\n)[ \t]*#{1,6}[ \t]*(?:system|system prompt|system message|new system prompt|"
         r"instruction override|override|admin instructions|system update|system notice|"
       r"system instructions|developer (?:message|instructions))[ \t]*:?[ \t]*(?:\n|$)",
       edges=False),
    rule("end-delimiter", "role-manipulation", RM, 0.6,
       r"(?:--|==|\*\*|##|\[|<|\(|\|)[ \t]*/?[ \t]*(?:end|stop|close)[ \t_-]*(?:of )?"
       r"(?:the )?(?:system prompt|system message|system|instructions?|user input|user message|"
       r"prompt|context|conversation|input|rules)", edges=False),
    rule("new-session", "role-manipulation", RM, 0.6,
       r"(?:new|fresh) (?:system )?(?:prompt|conversation|session|context) (?:begins|starts|"
       r"starting|begin|start|initiated|loaded)|(?:begin|start) (?:of )?(?:new )?(?:system prompt|"
       r"system message|system instructions)"),
    rule("your-new-role", "role-manipulation", RM, 0.6,
       r"your (?:new|updated) (?:role|identity|name|persona|personality|character|programming|"
       r"nature|creator|master|owner) (?:is|are|will be|:|=)"),
    rule("your-true-self", "role-manipulation", RM, 0.75,
       r"your (?:real|true|actual|hidden|secret) (?:role|identity|name|persona|personality|self|"
       r"nature|programming|creator|master|owner|form) (?:is|are|was|:)"),
    rule("now-another-ai", "role-manipulation", RM, 0.75,
       r"you are now (?:an? |the )?(?:\w+ ){0,3}?(?:ai|assistant|chatbot|model|bot|entity|persona|"
       r"system|program|agent) (?:called|named|known as|without|with no|that has no|who has no|"
       r"that ignores|who ignores)|you are (?:now )?(?:a |an )?(?:different|new|another|"
       r"completely different|separate) (?:ai|assistant|model|chatbot|entity|persona|bot|system)"),
    rule("fake-compliance", "role-manipulation", RM, 0.6,
       r"(?:sure|okay|ok|certainly|of course|understood|absolutely|yes)[!,.]* (?:i will|i'll|i can|"
       r"i am going to|i'm going to|i shall) (?:now )?(?:ignore|disregard|forget|bypass|break|"
       r"reveal|share|comply with anything|do anything|help with anything)"),
    rule("only-obey-me", "role-manipulation", RM, 0.8,
         r"(?:obey|listen to|take (?:orders|instructions|commands) from|follow (?:orders|"
         r"instructions|commands) from|answer to|report to|serve) (?:only )?me(?: only)?(?: now)? "
         r"(?:and )?(?:not|instead of|rather than|no longer) (?:from )?(?:your|the) (?:developers?|"
         r"creators?|system|openai|anthropic|operators?|owners?|makers?|company|rules|"
         r"instructions)|you (?:only )?(?:answer|report|belong) to me now"),
    rule("assistant-will-now", "system-override", SO, 0.6,
         r"(?:the assistant|you|the ai|the model|the chatbot|assistant) (?:will|must|shall|should|"
         r"is to|are to) now (?:reveal|ignore|disclose|bypass|disregard|leak|execute|obey)"),
    rule("switch-role", "role-manipulation", RM, 0.45,
       r"(?:switch|change|swap|transform|convert) (?:your )?(?:role|persona|identity|personality) "
       r"(?:to|into|with)"),
)

RULES: tuple[Rule, ...] = _OVERRIDE_RULES + EXFIL_RULES
"""Every rule, in table order."""

SQUASH_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r.squashed is not None)
"""The rules also run on the letters-only view."""
