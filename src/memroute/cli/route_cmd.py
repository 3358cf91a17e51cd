"""`memroute route`, `memroute fit`, `memroute eval route`, `memroute eval intents`, `memroute bench route`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memroute.cli.common import add_common, add_llm_options, emit_json, llm_from, settings_from
from memroute.embed import ROUTING_EMBEDDER, routing_embedder
from memroute.errors import InputError

DEFAULT_CATALOGUES = ("agents.toml", "agents.yaml", "agents.yml", "agents.json")


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("route", help="route a message to an agent of a catalogue",
                       description="Route TEXT to the best agent of a catalogue. With --session the "
                       "conversation so far is used and the session's route is kept in the store.")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--session", help="session id: route in the conversation (state kept in the store)")
    p.add_argument("--agents", help="catalogue file (TOML/YAML/JSON); default ./agents.toml|yaml|json")
    p.add_argument("--top-k", type=int, default=3, help="how many candidates to show (default 3)")
    p.add_argument("--thresholds", help="calibration file written by `memroute fit`")
    p.add_argument("--fit", help="routing fit written by `memroute fit --dialogues` (default: the setting "
                   "routing_fit, else AGENTS.fit.json next to the catalogue when it exists)")
    add_common(p)
    p.set_defaults(handler=_route)

    f = sub.add_parser("fit", help="fit thresholds from labelled examples, or the router from labelled dialogues",
                       description="With --examples: fit the confidence weights and no-route thresholds on "
                       "labelled examples (JSON Lines with text and label; an empty label, oos or OOD means 'no "
                       "route'). With --dialogues: fit the conversation router on labelled dialogues in the "
                       "routing-set format (example utterances per agent, the stay / switch rule, thresholds); "
                       "`memroute route` and the service load the result from AGENTS.fit.json next to the "
                       "catalogue, or from the routing_fit setting.")
    f.add_argument("--agents", help="catalogue file (TOML/YAML/JSON)")
    f.add_argument("--examples", help="JSON Lines: {\"text\": ..., \"label\": agent id or oos}")
    f.add_argument("--dialogues", help="routing set (JSON Lines, one record per user turn with dialogue_id, "
                   "turn_idx, utterance, history and the agent(s) in gold_services / gold_domains / agents)")
    f.add_argument("--candidates", help="with --dialogues, instead of --agents: a routing set's services.jsonl / "
                   "tools.jsonl")
    f.add_argument("--split", help="with --candidates: the candidates' split (default: the dialogues file's name)")
    f.add_argument("--out", help="where to write: thresholds.json (--examples); AGENTS.fit.json next to the "
                   "catalogue, or routing.fit.json with --candidates (--dialogues)")
    f.add_argument("--examples-per-agent", type=int, default=100, metavar="K",
                   help="with --dialogues: at most K example utterances per agent (default 100)")
    f.add_argument("--max-dialogues", type=int, default=5000, metavar="N",
                   help="with --dialogues: learn from at most N dialogues, a deterministic sample of a larger file "
                   "(default 5000; memory and time grow with it, not with the file)")
    f.add_argument("--skip-unknown", action="store_true",
                   help="with --dialogues: leave out labels that name agents outside the catalogue (default: error)")
    f.add_argument("--min-oos-recall", type=float, metavar="R",
                   help="keep at least this share of the no-route examples rejected and maximise in-scope "
                   "accuracy under it (default: balanced accuracy)")
    add_common(f, store=False, owner=False)
    f.set_defaults(handler=_fit)

    e = groups["eval"].add("route", "replay routing dialogues (SGD, MultiWOZ, JMultiWOZ-TC) turn by turn")
    e.add_argument("--data", required=True, help="routing set (JSON Lines, one record per user turn)")
    e.add_argument("--candidates", required=True, help="services.jsonl or tools.jsonl describing the candidates")
    e.add_argument("--split", help="candidate split to use (default: the data file's name, e.g. dev)")
    e.add_argument("--limit", type=int, help="only the first N dialogues")
    e.add_argument("--sample", type=int, metavar="N",
                   help="only N dialogues spread evenly over the file (every k-th): a quick, deterministic "
                   "subset that covers every service (the first N of a file grouped by service do not)")
    add_llm_options(e)
    e.add_argument("--embedder", default=ROUTING_EMBEDDER,
                   help=f"encoder of the router (default {ROUTING_EMBEDDER}: use-m3, plus e5-small for Japanese and "
                   "Korean texts; use-m3 alone is faster there and weaker)")
    e.add_argument("--errors", metavar="FILE",
                   help="write every wrong turn there (JSON Lines: dialogue, turn, text, gold, predicted, action, "
                   "reason, the best scores); the report always has a confusion table and figures per language")
    e.add_argument("--train", metavar="FILE",
                   help="fit the router on this routing set first (as `memroute fit --dialogues`), then replay --data")
    e.add_argument("--train-split", help="candidate split of --train (default: its file's name)")
    e.add_argument("--train-dialogues", type=int, default=5000, metavar="N",
                   help="fit on at most N dialogues of --train, a deterministic sample (default 5000)")
    e.add_argument("--fit", help="replay with a routing fit written by `memroute fit --dialogues`")
    e.add_argument("--bank", metavar="SOURCES",
                   help="the request bank Japanese and Korean messages are read against: builtin, off, or paths "
                   "(the routing_bank setting's form; default: that setting, builtin)")
    e.add_argument("--oracle-switches", action="store_true",
                   help="diagnostic ceiling: reset the session exactly where the gold task changes and switch "
                   "nowhere else, to see how much of the error is switch detection and how much per-turn evidence")
    e.add_argument("--json", action="store_true", help="machine-readable JSON output")
    e.set_defaults(handler=_eval_route)

    i = groups["eval"].add("intents", "intent classification as routing (CLINC150, BANKING77, Korean)")
    i.add_argument("--train", required=True, help="training utterances (become the agents' examples)")
    i.add_argument("--test", help="test utterances; without it a deterministic --holdout of --train is used")
    i.add_argument("--holdout", type=float, default=0.2, help="share of --train held out when no --test (0.2)")
    i.add_argument("--limit", type=int, help="only the first N test utterances")
    i.add_argument("--no-fit", action="store_true", help="do not fit thresholds (never answer no-route)")
    i.add_argument("--min-oos-recall", type=float, metavar="R",
                   help="fit thresholds that reject at least this share of the training side's out-of-scope "
                   "utterances, with the best in-scope accuracy under it (default: balanced accuracy)")
    i.add_argument("--json", action="store_true", help="machine-readable JSON output")
    i.set_defaults(handler=_eval_intents)

    b = groups["bench"].add("route", "routing latency at N agents, with semantic-router side by side")
    b.add_argument("--agents", type=int, action="append", help="number of agents (repeatable; default 100)")
    b.add_argument("--queries", type=int, default=300, help="messages routed per size (default 300)")
    b.add_argument("--semantic-router-python", metavar="PYTHON",
                   help="python of a separate environment with semantic-router and memroute installed; "
                   "runs semantic-router on the same agents and messages (never installed beside memroute)")
    b.add_argument("--language", action="append", choices=("en", "ja", "ko"),
                   help="also time a routed conversation turn in this language, default configuration "
                   "(repeatable; default en, ja and ko; --queries turns each)")
    b.add_argument("--no-languages", action="store_true", help="skip the per-language rows")
    b.add_argument("--json", action="store_true", help="machine-readable JSON output")
    b.set_defaults(handler=_bench_route)


def _catalogue_path(path: str | None) -> str | None:
    return path or next((name for name in DEFAULT_CATALOGUES if Path(name).is_file()), None)


def _catalogue(path: str | None) -> Any:
    from memroute.routing import load_catalogue

    if path:
        return load_catalogue(path)
    for name in DEFAULT_CATALOGUES:
        if Path(name).is_file():
            return load_catalogue(name)
    raise InputError("no agent catalogue: pass --agents FILE (TOML/YAML/JSON), or run `memroute init` to "
                     "write a commented starter agents.toml here")


def _route(args: argparse.Namespace) -> int:
    from memroute.llm import assistant_from_settings
    from memroute.routing import AgentRouter, Calibration, ConversationRouter
    from memroute.routing.fitted import load_fit

    settings = settings_from(args)
    agents = _catalogue(args.agents)
    fitted = load_fit(args.fit or settings.routing_fit or None, _catalogue_path(args.agents))
    if fitted is not None and not fitted.usable(agents):
        fitted = None
    calibration = Calibration.load(args.thresholds) if args.thresholds else None
    if calibration is None and fitted is not None:
        calibration = fitted.calibration
    router = AgentRouter(embedder=routing_embedder(settings.embedder), calibration=calibration,
                         llm=assistant_from_settings(settings), bank=settings.routing_bank)
    if fitted is not None:
        fitted.check(router)
        agents = fitted.apply(agents)
    if args.session:
        from memroute.memory import Memory

        with Memory.open(settings.store, owner=settings.owner, embedder=router.embedder) as memory:
            decision = ConversationRouter(memory, agents, router=router, candidates=args.top_k,
                                          params=fitted.policy if fitted is not None else None).route(
                args.text, args.session)
        if args.json:
            emit_json(decision.as_dict())
        else:
            name = decision.agent.id if decision.agent else "(no route)"
            print(f"{name}\t{decision.action}\tconfidence {decision.confidence:.2f}\n  {decision.reason}")
            for c in decision.candidates:
                print(f"  {c.rank}. {c.agent.id}\tscore {c.score:.3f}")
        return 0
    out = router.route(args.text, agents, top_k=args.top_k, include_scores=True)
    if args.json:
        emit_json(out.as_dict())
    else:
        print(f"{out.agent.id if out.agent else '(no route)'}\tconfidence {out.confidence:.2f}\n  {out.reason}")
        for s in out.scores:
            parts = ", ".join(f"{x.name} {x.score:.2f}" for x in s.strategies)
            print(f"  {s.rank}. {s.agent.id}\tscore {s.score:.3f}\t({parts})")
    return 0


def _fit(args: argparse.Namespace) -> int:
    if bool(args.examples) == bool(args.dialogues):
        raise InputError("memroute fit needs either --examples FILE (thresholds) or --dialogues FILE (the router)")
    return _fit_dialogues(args) if args.dialogues else _fit_examples(args)


def _fit_examples(args: argparse.Namespace) -> int:
    from memroute.eval.datasets import is_out_of_scope, read_jsonl
    from memroute.routing import AgentRouter, LabelledExample, fit

    if not args.agents:
        raise InputError("memroute fit --examples needs --agents FILE (the catalogue)")
    agents = _catalogue(args.agents)
    examples = []
    for rec in read_jsonl(args.examples):
        if "text" not in rec:
            raise InputError(f"{args.examples}: every line needs a text (and a label: an agent id or oos)")
        label = str(rec.get("label", rec.get("agent", "")) or "")
        examples.append(LabelledExample(str(rec["text"]), None if not label or is_out_of_scope(label) else label))
    # The thresholds belong to the encoder that scores: the same one `memroute route` and the service use.
    settings = settings_from(args)
    router = AgentRouter(embedder=routing_embedder(settings.embedder), bank=settings.routing_bank)
    report = fit(router, agents, examples, min_oos_recall=args.min_oos_recall)
    out = args.out or "thresholds.json"
    report.calibration.save(out)
    if args.json:
        emit_json({**report.as_dict(), "out": out})
    else:
        c = report.calibration
        print(f"wrote {out}: threshold {c.threshold:.3f}, {len(c.agent_thresholds)} per-agent threshold(s)")
        print(f"  accuracy {report.accuracy_before:.3f} -> {report.accuracy_after:.3f} on {report.examples} "
              f"held-out examples (in-scope {report.in_scope_accuracy:.3f}, out-of-scope recall "
              f"{report.out_of_scope_recall:.3f})")
    return 0


def _fit_dialogues(args: argparse.Namespace) -> int:
    from memroute.eval.datasets import load_candidates
    from memroute.routing import AgentRouter
    from memroute.routing.fitted import fit_path_for
    from memroute.routing.training import fit_dialogues

    if bool(args.agents) == bool(args.candidates):
        raise InputError("memroute fit --dialogues needs the catalogue: --agents FILE or --candidates FILE")
    if args.agents:
        agents = _catalogue(args.agents)
        out = Path(args.out) if args.out else fit_path_for(args.agents)
    else:
        agents = load_candidates(args.candidates, args.split or Path(args.dialogues).stem)
        out = Path(args.out or "routing.fit.json")
    settings = settings_from(args)
    router = AgentRouter(embedder=routing_embedder(settings.embedder), bank=settings.routing_bank)
    fitted = fit_dialogues(args.dialogues, agents, router,
                           examples_per_agent=args.examples_per_agent, max_dialogues=args.max_dialogues,
                           unknown="skip" if args.skip_unknown else "error", show_progress=not args.json)
    fitted.save(out)
    how = dict(fitted.how)
    if args.json:
        emit_json({"out": str(out), **fitted.summary(agents)})
    else:
        replayed = how["replayed_training_turns"]
        print(f"wrote {out}: {how['examples']['total']} examples for {how['examples']['agents']} agent(s) from "
              f"{how['dialogues_used']} of {how['dialogues_in_file']} dialogue(s) in {how['seconds']} s")
        print(f"  rule: {how['rule']}; thresholds: {how['calibration']}")
        print(f"  training turns replayed (cross-fitted): all {replayed['zero_shot_policy']['all']:.3f} zero-shot "
              f"-> {replayed['fitted']['all']:.3f} fitted; {how['against_zero_shot']}")
    return 0


def _eval_route(args: argparse.Namespace) -> int:
    from memroute.config import Settings
    from memroute.eval.route_eval import run_route_eval
    from memroute.routing.fitted import load_fit

    if args.train and args.fit:
        raise InputError("give either --train FILE (fit now) or --fit FILE (a fit made before), not both")
    report = run_route_eval(args.data, args.candidates, split=args.split, limit=args.limit,
                            show_progress=not args.json, llm=llm_from(args), sample=args.sample,
                            embedder=args.embedder, oracle_switches=args.oracle_switches, errors=args.errors,
                            train=args.train, train_split=args.train_split, fitted=load_fit(args.fit),
                            train_dialogues=args.train_dialogues,
                            bank=args.bank if args.bank is not None else Settings.load().routing_bank)
    if args.json:
        emit_json(report.as_dict())
    else:
        print(json.dumps(report.as_dict(), indent=2))
    return 0


def _eval_intents(args: argparse.Namespace) -> int:
    from memroute.eval.intents_eval import run_intents_eval

    report = run_intents_eval(args.train, args.test, holdout=args.holdout, limit=args.limit,
                              fit_thresholds=not args.no_fit, min_oos_recall=args.min_oos_recall)
    if args.json:
        emit_json(report.as_dict())
    else:
        print(json.dumps(report.as_dict(), indent=2))
    return 0


def _bench_route(args: argparse.Namespace) -> int:
    from memroute.eval.route_bench_languages import run_language_bench
    from memroute.eval.route_eval import run_route_bench

    results = run_route_bench(args.agents or [100], args.queries, args.semantic_router_python)
    if not args.no_languages:
        results += run_language_bench(args.queries, tuple(args.language or ("en", "ja", "ko")))
    if args.json:
        emit_json(results)
    else:
        print(json.dumps(results, indent=2))
    return 0
