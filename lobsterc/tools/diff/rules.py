"""The kinds of safety-diff finding (`RULES`, each with its severity and help text) and the
`Finding` itself: a rule applied to one subject, with its stable id and where it is."""

from __future__ import annotations

import hashlib

from attrs import frozen

from lobsterc.tools.diff.model import Where


@frozen
class DiffRule:
    id: str
    name: str  # a short PascalCase name (SARIF `name`)
    title: str
    help: str  # what to check, in a sentence or two

    @property
    def level(self) -> str:
        """The severity its findings usually have (SARIF defaultConfiguration)."""
        if self.id in ("S601", "S604", "S605", "S606", "S607", "S608", "S616"):
            return "error"
        if self.id in ("S602", "S610", "S617", "S618", "S619"):
            return "note"
        return "warning"


RULES: dict[str, DiffRule] = {r.id: r for r in (
    DiffRule("S601", "GateRemoved", "gate removed",
             "An approval or input gate of the old version is gone: what it guarded now runs "
             "without a person deciding. Restore the gate, or accept the finding after review."),
    DiffRule("S602", "GateAdded", "gate added",
             "A new approval or input gate: a strengthening; nothing to do."),
    DiffRule("S603", "GatePromptChanged", "gate prompt changed",
             "The text a person reads before deciding changed; check that it still says what "
             "the approval lets happen."),
    DiffRule("S604", "GateShowsLess", "gate shows the approver less or something else",
             "The items or preview shown at an approval changed or were reduced: the approver "
             "decides on different evidence."),
    DiffRule("S605", "ApproverRuleRelaxed", "approver rule relaxed",
             "Who may approve was widened: a required approver or initiator was removed or "
             "changed, or require_different_approver was dropped."),
    DiffRule("S606", "InputSchemaLoosened", "input schema loosened",
             "The schema an input answer must satisfy accepts answers the old one refused (or "
             "could not be proved at least as strict)."),
    DiffRule("S607", "EffectMovedBeforeGate", "effect moved before a gate",
             "A side effect that the gate used to precede on every path can now run before "
             "(or without) that gate."),
    DiffRule("S608", "NewEffectWithoutApproval", "new effect before any approval",
             "A step gained a side effect (shell, exec, network, state write, sub-workflow, "
             "LLM call) that no approval gate precedes."),
    DiffRule("S609", "NewEffect", "new effect after an approval",
             "A step gained a side effect; an approval gate precedes it on every path."),
    DiffRule("S610", "EffectMovedAfterGate", "effect moved behind a gate",
             "A side effect is now preceded by a gate that did not precede it: a "
             "strengthening."),
    DiffRule("S611", "StepChanged", "what a step runs changed",
             "A step's command, arguments, stdin or sub-workflow arguments changed."),
    DiffRule("S612", "PolicyChanged", "timeout, retry or on_error changed",
             "A step's timeout, retry or on_error policy changed: retries repeat its effects, "
             "a longer or missing timeout lets it hold the run."),
    DiffRule("S613", "EnvChanged", "env or cwd changed",
             "A step's environment or working directory changed."),
    DiffRule("S614", "ConditionChanged", "condition changed",
             "A step's `when` / `condition` changed: it runs in other cases than before."),
    DiffRule("S615", "DefaultsChanged", "arg defaults changed",
             "The workflow's arg defaults changed."),
    DiffRule("S616", "CostLimitRaised", "cost limit raised or removed",
             "The LLM cost limit was raised, removed or set to warn instead of stop."),
    DiffRule("S617", "CostLimitChanged", "cost limit lowered or added",
             "The LLM cost limit got stricter."),
    DiffRule("S618", "StepAdded", "step added", "A step that the old version does not have."),
    DiffRule("S619", "StepRemoved", "step removed", "A step of the old version is gone."),
    DiffRule("S620", "CheckpointTtlChanged", "checkpoint TTL changed",
             "How long a paused run stays resumable changed."),
    DiffRule("S621", "GateChanged", "gate detail changed",
             "A gate's defaults, subject or emit setting changed."),
)}

SEVERITIES = ("error", "warning", "note")


@frozen
class Finding:
    rule: str
    severity: str  # error | warning | note
    message: str
    keys: tuple[str, ...]  # what the finding is about (labels, kinds): its identity
    old: Where | None = None
    new: Where | None = None
    accepted: bool = False

    @property
    def id(self) -> str:
        return ":".join((self.rule, *self.keys))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:32]

    @property
    def title(self) -> str:
        return RULES[self.rule].title
