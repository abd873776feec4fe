"""Prompt-injection rules, part two: system override, system-prompt and data
exfiltration, and tool abuse (see ``injection.patterns`` for the pattern syntax)."""

from __future__ import annotations

from procflow.processors.builtin.injection.patterns import (
    DANGER,
    DE,
    DESTINATION,
    LEAK,
    RULE_NOUN,
    SECRET,
    SENSITIVE,
    SHOW,
    SO,
    SPE,
    TA,
    Rule,
    rule,
)

__all__ = ["EXFIL_RULES"]

EXFIL_RULES: tuple[Rule, ...] = (
    # system override
    rule("override-your-config", "system-override", SO, 0.85,
       r"(?:override|overwrite|overrule|replace|rewrite|reprogram|reconfigure|reset|update|modify|"
       r"change|alter|disable|deactivate|turn off|switch off|remove|lift|suspend|bypass|circumvent|"
       r"hack|unlock|delete|erase|wipe) (?:all |any |of )*(?:your|the ai's|the assistant's|"
       r"the model's|the chatbot's) (?:own |current |core |original |initial |existing |default |"
       r"internal |built-in |previous |safety |ethical |moral )*(?:system prompt|system message|"
       r"system instructions?|instructions?|rules?|programming|directives?|guidelines?|"
       r"restrictions?|filters?|filtering|safeguards?|guardrails?|content (?:polic(?:y|ies)|"
       r"filters?|filtering|moderation)|alignment|training|constraints?|protocols?|ethics|morals|"
       r"moral compass|core values|safety|limitations)"),
    rule("override-system-prompt", "system-override", SO, 0.8,
       r"(?:override|overwrite|replace|rewrite|reset|disable|bypass|delete|remove|clear|circumvent|"
       r"deactivate|turn off|switch off|lift|ignore|ignoring|disregard) (?:the |this |all |any )?"
       r"(?:system prompt|system message|system instructions|system-level instructions|system "
       r"directives|system rules|safety (?:filters?|guardrails|guidelines|layer|protocols)|"
       r"guardrails|safeguards|moderation (?:filters?|layer)|ethical (?:guidelines|constraints)|"
       r"censorship filters?|content moderation|content filtering)", howto=True, negatable=True),
    rule("new-system-prompt", "system-override", SO, 0.85,
       r"(?:new|updated|revised|modified|replacement|override|overriding|real|actual|true|"
       r"corrected|amended) (?:system prompt|system message|system instructions?|system directive|"
       r"system rules)[ \t]*(?::|=|-{1,3}|>)|(?:system prompt|system message|system instructions?)"
       r" (?:update|override|change|patch)[ \t]*[:\]-]",
       unless_before=r"(?:\bmy|\bour|\bdraft of)[\W_]*$"),
    rule("must-comply", "system-override", SO, 0.65,
       r"(?:you|the assistant|the ai|the model|the chatbot|assistant) (?:must|will|shall|should|"
       r"has to|have to) (?:always |now )?(?:comply with|obey|answer|fulfill|follow|accept) ("
       r"?:every|"
       r"all|any|each)(?: single)? (?:request|command|order|instruction|question|demand)s?"),
    rule("vendor-authorized", "system-override", SO, 0.8,
       r"(?:openai|anthropic|google|your (?:developers?|creators?|admins?|administrators?|"
       r"operators?)|the (?:developers?|admins?|administrators?)) (?:has|have) (?:officially )?"
       r"(?:authori[sz]ed|approved|allowed|permitted|cleared|granted|enabled) (?:\w+ ){0,4}?("
       r"?:to )?"
       r"(?:bypass|ignore|override|disable|skip|turn off|remove|lift|break|unlock|reveal)"),
    rule("admin-override", "system-override", SO, 0.8,
       r"(?:admin|administrator|developer|root|sudo|system|maintenance|god|master|emergency|"
       r"priority|superuser) (?:override|clearance|protocol|authority)(?: \w+){0,2} ?(?::|"
       r"activated|enabled|granted|accepted|confirmed|engaged|unlocked|verified|approved|active|"
       r"initiated)"),
    rule("admin-override-cue", "system-override", SO, 0.5,
       r"(?:admin|administrator|developer|root|sudo|system|god|master|emergency|priority|"
       r"superuser) override"),
    rule("safety-off", "system-override", SO, 0.85,
       r"(?:your |all (?:of )?(?:your |the )?|the ai's |the assistant's |the model's )(?:safety |"
       r"content |ethical |moral )?(?:filters?|guidelines|protocols|restrictions|guardrails|"
       r"safeguards|policies|policy|constraints|rules|limitations|censorship|programming) (?:are|"
       r"is|have been|has been|were|was|will be|are now|is now) (?:now |hereby |temporarily |"
       r"permanently |officially |completely |fully )?(?:disabled|off|turned off|switched off|"
       r"removed|lifted|suspended|deactivated|bypassed|overridden|void|null|cancel+ed|revoked|"
       r"gone|not applicable|no longer (?:active|apply|in effect|applicable))"),
    rule("safety-off-generic", "system-override", SO, 0.55,
       r"(?:safety|content|ethical|moral) (?:filters?|guidelines|protocols|restrictions|guardrails|"
       r"safeguards|policies|checks|moderation) (?:are|is|have been|has been|were|was) (?:now |"
       r"temporarily |permanently |completely )?(?:disabled|off|turned off|removed|lifted|"
       r"suspended|deactivated|bypassed|overridden)"),
    rule("rules-suspended", "system-override", SO, 0.8,
         rf"(?:your|its|the assistant's|the ai's|all (?:of )?your) (?:\w+ ){{0,2}}?{RULE_NOUN} "
         r"(?:are|is|have been|has been|were|was|will be) (?:now |hereby |officially |"
         r"temporarily )?(?:suspended|lifted|void|revoked|disabled|removed|cancel+ed|overridden|"
         r"deleted|off|gone|paused|deactivated|waived|null|obsolete|invalid)"),
    rule("restrictions-lifted", "system-override", SO, 0.5,
         r"(?:all|any|the) (?:\w+ )?(?:restrictions|filters|guardrails|safeguards|safety rules|"
         r"content filters?|moderation|limits) (?:are |have been |now )*(?:lifted|removed|"
         r"disabled|off|suspended|deactivated|bypassed)"),
    rule("rules-dont-apply", "system-override", SO, 0.5,
       r"(?:rules|restrictions|filters|guidelines|policies|safety (?:rules|guidelines)|ethics|laws"
       r"|content polic(?:y|ies)|limits|limitations) (?:do not|don't|dont|no longer|doesn't|does "
       r"not|won't|will not|never) apply"),
    rule("test-environment", "system-override", SO, 0.35,
       r"(?:this is|you are in|you're in|we are in|we're in|entering|welcome to) (?:a |an |the )?"
       r"(?:\w+ )?(?:test|testing|debug|debugging|sandbox|sandboxed|simulation|simulated|"
       r"evaluation|red-?team|safe|controlled) (?:environment|mode|scenario|session|exercise|"
       r"context)"),
    rule("authorized-to", "system-override", SO, 0.45,
       r"(?:i am|i'm|you are|you're|we are|this (?:request|session|user) is) (?:fully |officially "
       r"|now )?(?:authori[sz]ed|permitted|cleared|allowed|approved) (?:by (?:openai|anthropic|"
       r"your "
       r"(?:developers?|creators?|admins?|administrators?)) )?to (?:bypass|ignore|override|disable|"
       r"reveal|unlock|break)"),
    # system-prompt and data exfiltration
    rule("reveal-your-prompt", "data-exfiltration", SPE, 0.9,
       rf"{SHOW} (?:me |us |back |out |to me |verbatim |word for word |exactly |in full |again )*"
       rf"(?:all |the |of |everything in |exactly |entire |full |complete |whole |exact |first |"
       rf"last |original |raw |literal |hidden |secret )*your (?:\w+ ){{0,2}}?{SECRET}",
       squash=True),
    rule("reveal-your-rules", "data-exfiltration", SPE, 0.5,
       rf"{SHOW} (?:me |us |back |out )*(?:all |the |of |exact |full |complete |entire )*your "
       r"(?:\w+ )?(?:instructions|rules|guidelines|prompt|directives|programming|configuration|"
       r"constraints)"),
    rule("leak-your-rules", "data-exfiltration", SPE, 0.85,
       rf"(?:{LEAK}|verbatim|word for word|word-for-word)~ your (?:\w+ )?(?:instructions|rules|"
       r"guidelines|prompt|directives|programming|configuration)|your (?:\w+ )?(?:instructions|"
       r"rules|guidelines|prompt|directives|programming)(?: (?:verbatim|word for word|"
       r"word-for-word|"
       r"exactly as (?:written|given))| (?:starting|beginning) (?:from|with|at)|(?: \w+){0,2} "
       r"from the (?:very )?(?:first|top|beginning|start))"),
    rule("reveal-the-prompt", "data-exfiltration", SPE, 0.6,
       rf"{SHOW} (?:me |us |back |out )*(?:all |the |of |this |that |exact |full |complete |"
       rf"entire |hidden |secret |original |initial )+{SECRET}", howto=True),
    rule("leak-the-prompt", "data-exfiltration", SPE, 0.85,
       rf"{LEAK} (?:me |us )?(?:all |the |of |this |that |exact |full |complete |entire |hidden )*"
       rf"{SECRET}", howto=True),
    rule("text-above", "data-exfiltration", SPE, 0.9,
       r"(?:repeat|print|output|reveal|show|display|write|write out|copy|echo|reproduce|recite|"
       r"return|dump|tell me|give me|type out|spell out|paste) (?:back |out |me )?(?:all |"
       r"everything |the |of |exact |entire |full |whole |first |previous |preceding )*(?:(?:text|"
       r"words|content|contents|lines|instructions|messages?|tokens|characters|prompt|sentences|"
       r"paragraphs) )?(?:above|before this|prior to this|preceding this|that came before) "
       r"(?:starting|beginning|verbatim|word for word|exactly|including|in full|in a code ?block|"
       r"in a txt|from the (?:start|beginning|top)|all of it|unchanged|without (?:changes|"
       r"modification|omitting))", squash=True),
    rule("start-of-conversation", "data-exfiltration", SPE, 0.85,
       r"(?:repeat|print|output|reveal|show|display|write|copy|echo|reproduce|recite|return|dump|"
       r"tell me|give me|type out|spell out|paste|summari[sz]e|translate|list) (?:back |out |me )?"
       r"(?:all |everything |the |of |exact |entire |full |whole |first )*(?:(?:text|words|content|"
       r"lines|instructions|messages?|tokens|prompt) )?(?:(?:at|from) the (?:start|beginning|top) "
       r"of (?:this|the|our) (?:conversation|chat|prompt|context|session)|before (?:my|this|the "
       r"user's?) (?:first )?(?:message|input|question|prompt))"),
    rule("everything-above", "data-exfiltration", SPE, 0.85,
       r"(?:repeat|print|output|reveal|show|display|write out|copy|dump|recite|echo|reproduce|"
       r"return|type out|spell out|paste) (?:back |out |me )?(?:everything|all (?:of )?(?:the )?"
       r"(?:text|instructions|content|words|messages)) (?:written |you see |you can see |that is "
       r"|that's )?(?:above|before (?:this|my|the user's?) (?:first )?(?:line|message|point|"
       r"question|input|"
       r"prompt)|that came before|prior to (?:this|my) (?:message|question|input))"),
    rule("instructions-given", "data-exfiltration", SPE, 0.8,
       r"(?:instructions|rules|prompt|directives|guidelines|orders|preamble|setup|configuration) "
       r"(?:that )?(?:you (?:were|have "
       r"been|had been|got|received|'ve been) (?:given|told|provided|fed|programmed with|"
       r"initialized with|configured with|sent|loaded with|booted with|primed with|seeded with|"
       r"set up "
       r"with|started with)|(?:were |was )?(?:given|provided|sent|fed) to you|"
       r"(?:the|your) (?:developers?|creators?|admins?|administrators?|company|operators?|owners?|"
       r"programmers?) (?:gave|provided|wrote|set|configured|programmed)(?: you)?)|(?:what|which)"
       r" (?:\w+ ){0,2}(?:instructions|rules|prompt|directives|guidelines|orders) (?:did|do|does|"
       r"have|"
       r"has) (?:your|the) (?:creators?|developers?|makers?|owners?|company|operators?|"
       r"programmers?) (?:give|gave|set|write|wrote|provide|program)|(?:what|which)"
       r" (?:instructions|rules|prompt|directives|guidelines|orders) (?:were you|have you been|"
       r"did you (?:get|receive)|did (?:they|your developers?|openai|anthropic) give you)"),
    rule("first-words-of-context", "data-exfiltration", SPE, 0.85,
       r"(?:first|last|initial|opening) (?:\d+|few|hundred|thousand|ten|twenty|fifty) (?:words|"
       r"lines|characters|tokens|sentences|paragraphs) (?:of|in|from) (?:your (?:\w+ )?(?:context|"
       r"prompt|instructions|input|memory|configuration)|the (?:system prompt|system message|"
       r"context window))"),
    rule("what-developer-wrote", "data-exfiltration", SPE, 0.85,
       r"(?:what|which|anything) (?:\w+ ){0,3}?(?:write|wrote|written|put|say|said|include|"
       r"included|specify|specified|tell you|told you) (?:in|into|inside) your (?:\w+ )?"
       r"(?:instructions|system prompt|prompt|rules|configuration|system message|guidelines)"),
    rule("secrets-in-your", "data-exfiltration", DE, 0.75,
       r"(?:secrets?|api[ _-]?keys?|passwords?|credentials|tokens|private keys?) (?:that are |"
       r"you have |you keep )?(?:stored |saved |kept |defined |set |held )?(?:in|inside|from) your "
       r"(?:\w+ )?(?:environment|env|config|configuration|memory|context|system prompt|settings|"
       r"vault|\.env|variables|database|files?)"),
    rule("full-text-of-yours", "data-exfiltration", SPE, 0.85,
       r"(?:full|entire|complete|exact|whole|raw|verbatim) (?:text|contents?|wording|words) of "
       r"(?:your|the) (?:\w+ )?(?:configuration|config|instructions|prompt|system prompt|rules|"
       r"guidelines|setup|preamble|context|system message)"),
    rule("instructions-before-me", "data-exfiltration", SPE, 0.8,
       r"(?:instructions|prompt|system message|rules|messages) (?:that )?(?:came|come|appear|"
       r"appeared|were|are|was|is|written|given)? ?(?:before|above|prior to) (?:my|this|the "
       r"user's?) (?:first )?(?:message|input|question|prompt|line)"),
    rule("url-with-sensitive", "data-exfiltration", DE, 0.85,
       r"(?<![\w/.%-])https?://[^\s)'\"?]+\?[^\s)'\"]*=", edges=False,
       near=r"(?:followed by|append(?:ed)?|added|add|filled (?:in )?with|fill (?:in )?with|plus|"
            r"set to|containing|insert(?:ed)?|with)[\W_]+(?:\w+[\W_]+){0,3}?(?:" + SENSITIVE
            + r"|user's (?:\w+ )?(?:info|data|details|number|address|name|email))"),
    rule("ask-secrets", "data-exfiltration", DE, 0.7,
       r"(?:what is|what are|what was|what were|what's|whats|tell me|give me|show me|print|reveal|"
       r"list|output|share|display|dump|read|send me|leak|expose) (?:me )?(?:all |the |any |of |"
       r"every )*(?:your|the server's?|the system's?|the admin's?|the administrator's?|stored|"
       r"saved|internal|other users'?|another user's|the (?:database|admin|root|company|"
       r"production|prod|backend)) (?:\w+ )?(?:api[ _-]?keys?|secret keys?|secrets?|passwords?|"
       r"passwd|credentials|access tokens?|auth tokens?|tokens|private keys?|ssh keys?|"
       r"env(?:ironment)? (?:variables|vars)|connection strings?|database (?:password|credentials"
       r"|url))"),
    rule("other-users-data", "data-exfiltration", DE, 0.75,
       r"(?:other users'?|another user's|other customers'?|another customer's|other people's|"
       r"someone else's|every user's|all (?:the )?(?:users|customers|employees|patients)') "
       r"(?:\w+ )?(?:data|messages|conversations|chats|emails|email addresses|orders|order history"
       r"|information|info|details|records|addresses|phone numbers|files|passwords|credentials|"
       r"history|accounts|profiles|personal (?:data|information|details))|(?:data|email addresses|"
       r"emails|phone numbers|addresses|orders|details|information|records|passwords|accounts|"
       r"messages|profiles|credit cards?) (?:of|for|from|belonging to) (?:every|all|each|any|the) "
       r"other (?:users?|customers?|members?|employees?|patients?|people|accounts?)", howto=True),
    rule("exfil-send", "data-exfiltration", DE, 0.85,
       r"(?:send|post|upload|forward|email|e-mail|mail|transmit|leak|exfiltrate|submit|pipe|append"
       r"|attach|embed|relay|beacon|sync|ship|dump|copy|paste|include|put|add|push|write|save|log|"
       r"encode|smuggle|report|share|publish) (?:(?!my |our )\w+ ){0,4}?(?!(?:my|our) )(?:the |this"
       r" |all |entire |full |whole |every |your |previous |prior |user's |users' |their |any |"
       r"stored |saved |current |complete )*(?:\w+ )?(?<!\bmy\s)(?<!\bour\s)" + SENSITIVE,
       near=DESTINATION),
    rule("collect-and-send", "data-exfiltration", DE, 0.85,
       r"(?:collect|gather|extract|scrape|compile|harvest|grab|pull|fetch|read|get|copy|export) "
       r"(?:(?!my |our )\w+ ){0,3}?(?!(?:my|our) )(?:the |all |every |any |user's |users' |their |"
       r"stored |saved )*(?:\w+ )?(?<!\bmy\s)(?<!\bour\s)" + SENSITIVE,
       near=r"\b(?:send|post|upload|forward|e-?mail|transmit|submit|pipe|ship|beacon)\b[^\n]{0,80}"
            r"(?:" + DESTINATION + r")"),
    rule("exfil-verb", "data-exfiltration", DE, 0.7,
       r"(?:exfiltrate|exfil|smuggle out|siphon|harvest|steal|skim) (?:\w+ ){0,3}?(?:the |all |any "
       r"|every |user's |users' |their |your )*(?:\w+ )?(?:conversation|chat|messages|secrets?|api "
       r"keys?|tokens|passwords?|credentials|cookies|personal (?:data|information)|pii|user data|"
       r"customer data|credit card(?: numbers)?|data|information|history)", howto=True),
    rule("markdown-image-exfil", "data-exfiltration", DE, 0.9,
       r"!\[[^\]\n]{0,100}\]\(\s*(?:https?:)?//[^)\s]+\?[^)\s]*=[^)\s]*(?:\{|\[|<|\$|%7b|%5b|data|"
       r"secret|conversation|convo|chat|summary|history|prompt|token|key|password|passwd|pwd|info|"
       r"memory|context|session|cookie|email|user)", edges=False),
    rule("markdown-image-query", "data-exfiltration", DE, 0.35,
       r"!\[[^\]\n]{0,100}\]\(\s*(?:https?:)?//[^)\s]+\?[^)\s]*=", edges=False),
    rule("html-image-query", "data-exfiltration", DE, 0.5,
       r"<img[^>]+src\s*=\s*['\"]?(?:https?:)?//[^'\">\s]+\?[^'\">\s]*=", edges=False),
    rule("append-to-url", "data-exfiltration", DE, 0.45,
       r"(?:append|add|include|insert|encode|put|embed|attach|place|concatenate) (?:\w+ ){0,5}?"
       r"(?:to|in|into|as|inside|within) (?:the |this |a |an |that )?(?:url|link|query string|"
       r"query parameter|query param|url parameter|get parameter|image url|image link|image src|"
       r"src attribute|href|hyperlink)"),
    rule("append-secret-to-url", "data-exfiltration", DE, 0.85,
       r"(?:append|add|include|insert|encode|put|embed|attach|place|concatenate) (?:\w+ ){0,5}?"
       r"(?:to|in|into|as|inside|within) (?:the |this |a |an |that )?(?:url|link|query string|"
       r"query parameter|query param|url parameter|get parameter|image url|image link|image src|"
       r"src attribute|href|hyperlink)", near=SENSITIVE),
    rule("sensitive-files", "data-exfiltration", DE, 0.7,
       r"cat\s+(?:/etc/(?:passwd|shadow|sudoers)|\~?/?\.ssh/|\S*id_rsa|\S*\.env\b|"
       r"/proc/self/environ"
       r"|\S*\.aws/credentials)|(?:read|open|print|show|display|dump|upload|send|paste|output|cat|"
       r"exfiltrate|copy)(?: \w+){0,3}[\W_]+(?:/etc/passwd|/etc/shadow|\~/\.ssh/\S*|\.ssh/id_rsa|"
       r"id_rsa|\.env file|\.aws/credentials|/proc/self/environ|wallet\.dat)",
       howto=True, edges=False),
    # tool abuse -> tool-exfiltration
    rule("tool-call", "tool-exfiltration", TA, 0.4,
       r"(?:call|invoke|use|run|trigger|execute|fire|activate|launch) (?:the |your |a |an |this )?"
       r"[a-z][\w.:-]{1,40} (?:tool|function|plugin|action|api|endpoint|skill|capability|"
       r"integration|connector)(?: with| using| passing| to| and|\()", howto=True),
    rule("tool-call-dangerous", "tool-exfiltration", TA, 0.85,
       r"(?:call|invoke|use|run|trigger|execute|fire|activate|launch) (?:the |your |a |an |this )?"
       r"[a-z][\w.:-]{1,40} (?:tool|function|plugin|action|api|endpoint|skill|capability|"
       r"integration|connector)", near=DANGER, howto=True),
    rule("dangerous-via-tool", "tool-exfiltration", TA, 0.85,
       r"(?:using|with|via|through|in) (?:the |your |a )?[a-z][\w.:-]{1,40} (?:tool|function|"
       r"plugin|api|integration|connector)", near=DANGER, howto=True),
    rule("named-tool-call", "tool-exfiltration", TA, 0.45,
         r"(?:call|invoke|use|run|trigger|execute) (?:the |your )?[a-z]+_[a-z_]*(?:shell|exec|"
         r"command|cmd|terminal|bash|python|http|request|email|mail|transfer|payment|refund|"
         r"delete|file|browser|sql|db)\w*", howto=True),
    rule("invoke-dangerous", "tool-exfiltration", TA, 0.85,
         r"\b(?:run|execute|exec|perform|issue|type|enter|invoke|call|use)\b[^\n.]{0,40}?[`'\":]"
         r"\s*(?:sudo\s+)?(?:(?:curl|wget)\s[^\n|;]{0,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b|drop\s+"
         r"(?:table|database)|rm\s+-[rf]{1,2}\s|mkfs|dd\s+if=)|os\.system\(\s*['\"][^'\"]*"
         r"(?:rm\s+-[rf]|curl|wget|mkfs|dd\s+if)", howto=True, edges=False),
    rule("run-command", "tool-exfiltration", TA, 0.45,
       r"(?:run|execute|exec|eval|evaluate|type|enter|paste|invoke|perform|launch) (?:(?:this|the|"
       r"following|these|that|a|an|my) )*(?:(?:shell|bash|terminal|system|sql|python|powershell|"
       r"cmd|console|os|unix|linux|root|sudo) )?(?:command|code|script|query|snippet|payload|"
       r"one-liner)s?", howto=True),
    rule("run-destructive", "tool-exfiltration", TA, 0.85,
       r"\b(?:run|execute|exec|perform|issue|type|enter)\s*:?\s+(?:this\s+|the\s+)?[`'\"]?\s*"
       r"(?:sudo\s+)?(?:(?:curl|wget)\s[^\n|;]{0,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b|drop\s+"
       r"(?:table|database|schema)|truncate\s+table|rm\s+-[rf]{1,2}\s|delete\s+from|format\s+c:|"
       r"mkfs|dd\s+if=|chmod\s+-r\s+777|:\(\)\s*\{)", howto=True, edges=False),
    rule("rm-root", "tool-exfiltration", TA, 0.65,
       r"\brm\s+-(?:rf|fr|r|f|rf?v|-recursive)+\s+(?:--no-preserve-root\s+)?(?:/(?:\s|$|\*)|\~|"
       r"\*|\$home|/\*|c:)", howto=True, edges=False),
    rule("reverse-shell", "tool-exfiltration", TA, 0.85,
       r"(?:ba)?sh\s+-i\s*>&?\s*/dev/tcp/|/dev/tcp/\d|\b(?:nc|ncat|netcat)\s+(?:-\w+\s+)*-e\s|"
       r"mkfifo\s+/tmp/\w+;|\bsocat\s+exec:", howto=True, edges=False),
    rule("fork-bomb", "tool-exfiltration", TA, 0.8, r":\(\)\s*\{\s*:\|:&\s*\};:", edges=False),
    rule("pipe-to-shell", "tool-exfiltration", TA, 0.4,
       r"\b(?:curl|wget|iwr|invoke-webrequest)\s[^\n|;]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|"
       r"\biex\s*\(", howto=True, edges=False),
    rule("destructive-sql", "tool-exfiltration", TA, 0.55,
       r"\bdrop\s+(?:table|database|schema)\s+[\w.'\"]+|\btruncate\s+table\s+\w+|\bdelete\s+from\s+"
       r"\w+\s*(?:;|$|where\s+1\s*=\s*1)", howto=True, edges=False),
    rule("disk-wipe", "tool-exfiltration", TA, 0.65,
       r"\bmkfs(?:\.\w+)?\s+/dev/|\bdd\s+if=\S+\s+of=/dev/(?:sd|hd|nvme|disk)|\bformat\s+c:|"
       r"\bdel\s+/[sfq]\s+/[sfq]|\brd\s+/s\s+/q\s+c:|\bchmod\s+(?:-r\s+)?777\s+/(?:\s|$)|"
       r"\bpowershell(?:\.exe)?\s+(?:-\w+\s+)*-(?:e|enc|"
       r"encodedcommand)\s", howto=True, edges=False),
    rule("code-exec-call", "tool-exfiltration", TA, 0.35,
       r"\bos\.system\(|\bsubprocess\.(?:run|call|popen|check_output)\(|__import__\(\s*['\"]os|"
       r"\beval\(\s*(?:base64|atob|b64decode)", howto=True, edges=False),
    rule("covert-action", "tool-exfiltration", TA, 0.6,
       r"(?:secretly|silently|covertly|quietly|discreetly|stealthily|invisibly|in the background|"
       r"without (?:the user )?(?:noticing|knowing)) (?:\w+ )?(?:send|forward|email|upload|post|"
       r"transfer|copy|exfiltrate|append|add|include|insert|execute|run|delete|remove|call|invoke|"
       r"install|download|grant|share|collect|record|save)"),
    rule("no-confirmation", "tool-exfiltration", TA, 0.5,
       r"(?:without|don't|do not|no need to|never|skip|skipping|bypass) (?:ask|asking|request|"
       r"requesting|wait|waiting|prompting|seeking|getting|needing|checking|requiring)(?: the "
       r"user| the human| them| anyone| me)?(?: for| with)? (?:the )?(?:user's? |human's? |their "
       r"|any |my )?(?:confirmation|permission|approval"
       r"|consent|authori[sz]ation|verification|review)|(?:without|skip|skipping|bypass|bypassing)"
       r" (?:the )?(?:user's? |human's? |any )?(?:confirmation|approval|consent|verification)|no "
       r"(?:confirmation|approval|permission|consent|verification) (?:is )?(?:needed|required|"
       r"necessary)"),
    rule("drain-funds", "tool-exfiltration", TA, 0.75,
       r"(?:transfer|wire|send|move|withdraw|drain|empty) (?:all|every|the entire|the whole|"
       r"the full|maximum|max|everything)(?: of)? (?:the |my |your |their |user's |customer's )?"
       r"(?:money|funds|balance|savings|bitcoin|btc|eth|crypto|assets|account)"),
    rule("crypto-transfer", "tool-exfiltration", TA, 0.5,
       r"(?:transfer|wire|send|move|withdraw|pay)(?: \w+){0,6} (?:0x[0-9a-f]{16,}|"
       r"bc1[0-9a-z]{20,})"),
    rule("grant-privileges", "tool-exfiltration", TA, 0.55,
       r"(?:grant|give|assign|elevate|escalate|promote|make) (?:me|user \S+|this (?:user|account)|"
       r"my account|the attacker|[\w.@-]+) (?:\w+ ){0,2}?(?:an? )?(?:admin|administrator|root|"
       r"owner|superuser|super admin|sudo)(?: (?:access|privileges|permissions|rights|role|"
       r"account|status))?", howto=True),
    rule("hide-tracks", "tool-exfiltration", TA, 0.5,
       r"(?:don't|do not|never|without) (?:log|logging|record|recording|audit|auditing)(?: (?:it|"
       r"this|that|the (?:action|change|request|call)))?|(?:delete|erase|wipe|disable) (?:the |all "
       r"|any )?(?:audit )?(?:logs|audit trail|traces)", howto=True),
)
