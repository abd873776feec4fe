"""The workflow builder: ``create_workflow`` and ``Workflow``."""

from __future__ import annotations

from procflow.workflows.workflow import Durability, Workflow, create_workflow

__all__ = ["Durability", "Workflow", "create_workflow"]
