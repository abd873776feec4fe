"""Imported by each ``procflow worker`` process (Dramatiq's broker module): rebuilds the
targets and ``broker`` from ``PROCFLOW_WORKER_BOOT``. Not for import elsewhere."""

from __future__ import annotations

import json
import os

from procflow.studio.targets import load_target
from procflow.studio.worker import BOOT_ENV
from procflow.workers.app import WorkerApp
from procflow.workers.settings import WorkerSettings

__all__ = ["app", "broker"]

_boot = json.loads(os.environ[BOOT_ENV])
app = WorkerApp([load_target(spec) for spec in _boot["targets"]],
                WorkerSettings.from_json(_boot["settings"]))
broker = app.broker
