"""The one-coin EM against crowd-kit's reference implementation (where crowd-kit is installed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reasoning.consensus.em import fit_one_coin

_CROWDKIT = Path(os.environ.get("SPORAL_CROWDKIT_PYTHON", "/tmp/ck/bin/python"))
_SCRIPT = """
import json, sys
import pandas as pd
from crowdkit.aggregation import OneCoinDawidSkene
rows = json.load(sys.stdin)
model = OneCoinDawidSkene(n_iter=200).fit(pd.DataFrame(rows, columns=["task", "worker", "label"]))
print(json.dumps({"skills": model.skills_.to_dict(), "labels": model.labels_.to_dict()}))
"""


def _crowdkit_available() -> bool:
    if not _CROWDKIT.exists():
        return False
    probe = subprocess.run([str(_CROWDKIT), "-c", "import crowdkit"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _crowdkit_available(), reason="crowd-kit is not installed")
def test_one_coin_em_matches_crowd_kit():
    rng = np.random.default_rng(11)
    items, skill = 300, np.array([0.95, 0.85, 0.75, 0.65, 0.9])
    truth = rng.random(items) < 0.4
    rows, item, who, value = [], [], [], []
    for k in range(items):
        for j in rng.choice(5, 3, replace=False):
            v = bool(truth[k] ^ (rng.random() > skill[j]))
            rows.append([k, f"w{j}", int(v)])
            item.append(k)
            who.append(int(j))
            value.append(v)
    ours = fit_one_coin(np.array(item), np.array(who), np.array(value), n_items=items,
                        n_annotators=5)
    ran = subprocess.run([str(_CROWDKIT), "-c", _SCRIPT], input=json.dumps(rows),
                         capture_output=True, text=True, check=True)
    reference = json.loads(ran.stdout)
    theirs = np.array([reference["skills"][f"w{j}"] for j in range(5)])
    assert np.abs(ours.accuracy - theirs).max() < 0.05
    right = np.array(value) == truth[np.array(item)]
    empirical = np.array([right[np.array(who) == j].mean() for j in range(5)])
    # crowd-kit's skills are unsmoothed (hard labels in the M-step); ours as close to the truth
    assert np.abs(ours.accuracy - empirical).mean() <= np.abs(theirs - empirical).mean() + 0.01
    labels = np.array([reference["labels"][str(k)] for k in range(items)]) == 1
    assert ((ours.posterior >= 0.5) == labels).mean() > 0.95
    # no class prior here (core.py says why): as accurate as crowd-kit's labels all the same
    assert ((ours.posterior >= 0.5) == truth).mean() >= (labels == truth).mean() - 0.01
