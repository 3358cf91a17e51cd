"""`memroute eval convert SOURCE ...`: turn a public evaluation set, as published, into memroute's JSON Lines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memroute.cli.common import emit_json, examples

_EXAMPLES = {
    "locomo": "memroute eval convert locomo LoCoMo/ data/locomo_retrieval --first 7",
    "sgd": "memroute eval convert sgd dstc8-schema-guided-dialogue/ data/sgd_routing",
    "multiwoz": "memroute eval convert multiwoz val.json.zip data/multiwoz_routing --schema multiwoz/",
    "jmultiwoz": "memroute eval convert jmultiwoz JMultiWOZ-TC/ data/jmultiwoz_tc_routing",
    "clinc150": "memroute eval convert clinc150 oos-eval/ data/clinc150",
    "banking77": "memroute eval convert banking77 task-specific-datasets/ data/banking77",
    "kochat": "memroute eval convert kochat kochat/ data/kochat_ko_intent",
}


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = groups["eval"].add("convert", "convert a public evaluation set, as its authors publish it, into the JSON "
                                      "Lines that memroute eval reads (docs/evaluate.md)")
    sources = p.add_subparsers(dest="source", metavar="SOURCE", required=True)

    def source(name: str, help_text: str, src_help: str) -> argparse.ArgumentParser:
        s: argparse.ArgumentParser = sources.add_parser(
            name, help=help_text, description=help_text, epilog=examples(_EXAMPLES[name]),
            formatter_class=argparse.RawDescriptionHelpFormatter)
        s.add_argument("src", type=Path, metavar="SRC", help=src_help)
        s.add_argument("out", type=Path, metavar="OUT", help="folder to write the converted set into")
        s.add_argument("--json", action="store_true", help="print the counts as JSON")
        s.set_defaults(handler=_convert)
        return s

    s = source("locomo", "LoCoMo -> sessions.jsonl + qa.jsonl", "the LoCoMo repository or its data/locomo10.json")
    s.add_argument("--first", type=int, metavar="N", help="only the first N conversations (the figures use 7)")
    s = source("sgd", "Schema-Guided Dialogue -> train/dev.jsonl + services.jsonl",
               "the dstc8-schema-guided-dialogue repository (train/, dev/, test/)")
    s.add_argument("--splits", default="train,dev", help="comma-separated splits (default: train,dev)")
    s.add_argument("--train-sample", type=int, default=2000, metavar="N",
                   help="train dialogues to keep (default 2000; 0 keeps all)")
    s.add_argument("--seed", type=int, default=13)
    s = source("multiwoz", "MultiWOZ -> dev.jsonl + services.jsonl",
               "a MultiWOZ dialogue file in the data.json shape (ConvLab's val.json[.zip]) or a MultiWOZ 2.2 split "
               "folder (dev/)")
    s.add_argument("--schema", type=Path, required=True, help="MultiWOZ 2.2 schema.json (or the multiwoz repository)")
    s.add_argument("--ids", type=Path, help="keep only the dialogues listed in this file (e.g. valListFile.txt)")
    s.add_argument("--split", default="dev", help="name of the output file (default: dev)")
    s = source("jmultiwoz", "JMultiWOZ-TC -> dev/train.jsonl + tools.jsonl",
               "the JMultiWOZ-TC folder with dataset.zip unzipped (jmultiwoz_tc_input.jsonl, ..._ground.jsonl, "
               "tools.json)")
    s.add_argument("--train-sample", type=int, default=1000, metavar="N",
                   help="train dialogues to keep (default 1000; 0 keeps all)")
    s.add_argument("--seed", type=int, default=13)
    for name, what in (("clinc150", "CLINC150 data_full.json -> train/dev.jsonl + labels.jsonl"),
                       ("banking77", "BANKING77 train.csv -> train.jsonl + labels.jsonl"),
                       ("kochat", "kochat demo/data CSVs -> dev.jsonl + labels.jsonl")):
        s = source(name, what, f"the {name} repository (or the file / folder itself)")
        s.add_argument("--with-test", action="store_true", help="also write the test split (report it, never tune "
                                                                "on it)")


def _convert(args: argparse.Namespace) -> int:
    from memroute.eval.convert import intents, jmultiwoz, locomo, multiwoz, sgd

    src, out = args.src, args.out
    if args.source == "locomo":
        stats = locomo.convert(src, out, first=args.first)
    elif args.source == "sgd":
        stats = sgd.convert(src, out, splits=tuple(s.strip() for s in args.splits.split(",") if s.strip()),
                            train_sample=args.train_sample or None, seed=args.seed)
    elif args.source == "multiwoz":
        stats = multiwoz.convert(src, out, schema=args.schema, ids=args.ids, split=args.split)
    elif args.source == "jmultiwoz":
        stats = jmultiwoz.convert(src, out, train_sample=args.train_sample or None, seed=args.seed)
    else:
        stats = getattr(intents, args.source)(src, out, with_test=args.with_test)
    if args.json:
        emit_json(stats)
    else:
        print(f"{args.source}: wrote {out}: " + ", ".join(f"{k} {v}" for k, v in stats.items()
                                                          if isinstance(v, int) and not isinstance(v, bool)))
    return 0
