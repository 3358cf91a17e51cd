"""Probe late interaction (MaxSim) over use-m3's own token vectors, per text, as the e5 probe did.

:mod:`benchmarks.probe_late_interaction` scored MaxSim over multilingual-e5-small's token vectors; recall's default
encoder, use-m3, does not run e5, so the question's e5 pass would be new work. This probe asks whether use-m3's own
pass gives token vectors that carry the same evidence: each form of :data:`benchmarks.use_m3_tokens.FORMS`
(``static``, ``feats``, ``projected``, ``deep``, ``deep3``) in place of e5's, scored by the same
:func:`benchmarks.probe_late_interaction.score_table` (``maxsim``, ``maxsim-idf`` with the df of use-m3's
SentencePiece ids over the ranking's candidates, ``symmetric``, ``maxsim-centred``, ``centred-idf``, and each blended
with ``pooled-default``: use-m3's own cosine, from the same pass).

Data as the e5 probe's recall side: the everyday set's **train** split (answerable questions; dev is never read) and
LoCoMo (each conversation's turns, one at a time, the candidates of its questions; recall@5 of the evidence).

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.probe_use_m3_tokens [--probe recall|locomo] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.probe_encoders import EVERYDAY_TRAIN  # noqa: E402
from benchmarks.probe_late_interaction import LOCOMO, Encode, Encoded, probe_locomo, probe_recall  # noqa: E402
from benchmarks.use_m3_tokens import FORMS, TokenPass, UseM3Tokens  # noqa: E402


def use_m3_encoders(forms: Sequence[str] = FORMS) -> dict[str, Encode]:
    """One :data:`Encode` per token form, sharing one pass per distinct text (use-m3 has no query / passage side):
    the form's token vectors and ``pooled["default"]``, use-m3's sentence vector."""
    model = UseM3Tokens()
    cache: dict[str, TokenPass] = {}

    def make(form: str) -> Encode:
        def encode(texts: Sequence[str], side: str) -> dict[str, Encoded]:
            for text in dict.fromkeys(texts):
                if text not in cache:
                    p = model.encode(text)
                    cache[text] = TokenPass(p.vector, p.ids, {f: p.forms[f].astype(np.float16) for f in forms})
            return {t: Encoded(cache[t].ids, cache[t].forms[form], {"default": cache[t].vector}) for t in texts}

        return encode

    return {form: make(form) for form in forms}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="append", choices=["recall", "locomo"], help="default: recall")
    parser.add_argument("--forms", default=",".join(FORMS), help=f"comma-separated, of {', '.join(FORMS)}")
    parser.add_argument("--everyday", type=Path, default=EVERYDAY_TRAIN)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--json", action="store_true", help="one JSON line per probe and form")
    args = parser.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    if set(forms) - set(FORMS):
        parser.error(f"unknown forms: {', '.join(sorted(set(forms) - set(FORMS)))}")
    encoders = use_m3_encoders(forms)
    for probe in args.probe or ["recall"]:
        for form in forms:
            t0 = time.perf_counter()
            report: dict[str, Any]
            if probe == "recall":
                report = probe_recall(encoders[form], args.everyday, ("default",))
            else:
                report = probe_locomo(encoders[form], args.locomo, ("default",))
            out = {"probe": probe, "form": form, "seconds": round(time.perf_counter() - t0, 1), **report}
            print(json.dumps(out, ensure_ascii=False, indent=None if args.json else 1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
