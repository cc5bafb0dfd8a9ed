#!/usr/bin/env python3
"""Writes matcher_fixtures.json: results made from the corpus's expected blocks, each with the
verdict of the reference matcher (check_corpus.py's compare), so the Rust port can be checked
against it without Python.

Usage: python3 gen_matcher_fixtures.py [CONFORMANCE_DIR]
(default: ../../conformance, the copy of the corpus kept in the repository)

For every case it builds a result that satisfies `expected` (placeholders filled in, numbered ones
consistently) and a few perturbed ones: a changed leaf, a dropped or added key, reordered arrays,
int/float and bool/number swaps, a numbered placeholder bound inconsistently, a reformatted JSON
cause, a wrong status, a wrong list of entered states. The verdict is whatever the reference says;
the fixtures record agreement, not intent.
"""

import copy
import glob
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "..", "conformance")
PER_CASE = 4
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_.\-]*(?::\d+)?>")


def fill(value, rng, bound):
    """A value satisfying `value`: placeholders replaced by plausible texts."""
    if isinstance(value, str) and PLACEHOLDER.search(value):
        if value in ("<timestamp>", "<RandomNumberGenerated>"):
            return rng.choice([1700000000000, 0.25, "text", None, [1]])

        def sub(m):
            tok = m.group(0)
            if re.search(r":\d+>$", tok):
                # The same text for every occurrence; some contain '-' so that the lazy
                # binding of the reference gets exercised.
                return bound.setdefault(tok, rng.choice([f"v{len(bound)}", f"a-{len(bound)}-b", "0f8e-77"]))
            return rng.choice(["", "x", "us-east-1", "a:b/c", "<weird>"])

        return PLACEHOLDER.sub(sub, value)
    if isinstance(value, list):
        return [fill(v, rng, bound) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, rng, bound) for k, v in value.items()}
    return value


def leaves(value, path=()):
    yield path, value
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))


def replace_at(value, path, new):
    if not path:
        return new
    value = copy.deepcopy(value)
    cur = value
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = new
    return value


def perturb_value(value, rng):
    """A few variants of `value`, each differing somewhere (or only in representation)."""
    out = []
    nodes = list(leaves(value))
    for _ in range(3):
        path, node = rng.choice(nodes)
        if isinstance(node, bool):
            new = rng.choice([not node, int(node)])
        elif isinstance(node, (int, float)):
            new = rng.choice([node + 1, float(node), str(node), -node])
        elif isinstance(node, str):
            new = rng.choice([node + "x", node[:-1], None, node.upper()])
        elif node is None:
            new = rng.choice([0, "null", False])
        elif isinstance(node, list):
            new = rng.choice([node[::-1], node + [None], node[:-1]])
        else:
            keys = list(node)
            new = dict(node)
            if keys and rng.random() < 0.5:
                new.pop(rng.choice(keys))
            else:
                new["extra"] = 1
            if rng.random() < 0.3:
                new = dict(reversed(list(new.items())))
        out.append(replace_at(value, path, new))
    return out


def reformat_json_text(text):
    """The same JSON with other spacing and key order, when `text` is a JSON object text."""
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if isinstance(v, dict):
        v = dict(reversed(list(v.items())))
    return json.dumps(v, indent=1)


def results_for(case, rng):
    exp = case["expected"]
    bound = {}
    base = {"status": exp["status"], "output": None, "error": None, "cause": None}
    if exp["status"] == "SUCCEEDED":
        base["output"] = fill(exp["output"], rng, bound)
    for f in ("error", "cause"):
        if exp.get(f) is not None:
            base[f] = fill(exp[f], rng, bound)
        elif f not in exp:
            base[f] = rng.choice([None, "unrecorded"])
    if "expected_states_entered" in case:
        base["states_entered"] = list(case["expected_states_entered"])
    results = [base]
    if exp["status"] == "SUCCEEDED":
        results += [dict(base, output=o) for o in perturb_value(base["output"], rng)]
        results.append(dict(base, status="FAILED"))
        results.append(dict(base, output=None))
    else:
        for f in ("error", "cause"):
            if isinstance(base[f], str):
                results.append(dict(base, **{f: base[f] + " "}))
                again = reformat_json_text(base[f])
                if again is not None:
                    results.append(dict(base, **{f: again}))
        results.append(dict(base, status="SUCCEEDED", output={}))
        results.append(dict(base, error=None))
    if "states_entered" in base:
        results.append(dict(base, states_entered=base["states_entered"][:-1]))
        results.append(dict(base, states_entered=base["states_entered"] + ["Extra"]))
    if bound:
        # One occurrence of a numbered placeholder filled with another text than the rest.
        tok = rng.choice(sorted(bound))
        text = bound[tok]
        for f in ("output", "error", "cause"):
            spots = [p for p, v in leaves(base[f]) if isinstance(v, str) and text in v]
            if spots:
                p = rng.choice(spots)
                node = dict(leaves(base[f]))[p]
                results.append(dict(base, **{f: replace_at(base[f], p, node.replace(text, text + "Z", 1))}))
                break
    return results


def main(argv):
    root = argv[0] if argv else DEFAULT_DIR
    sys.path.insert(0, root)
    import check_corpus  # noqa: E402  (the reference matcher)

    rng = random.Random(20240601)
    fixtures = []
    for path in sorted(glob.glob(os.path.join(root, "cases", "**", "*.json"), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            case = json.load(fh)
        entry = {"name": case["name"], "expected": case["expected"], "results": []}
        if "expected_states_entered" in case:
            entry["expected_states_entered"] = case["expected_states_entered"]
        results = results_for(case, rng)
        # The satisfying result and a sample of the others keep the file small.
        results = results[:1] + rng.sample(results[1:], min(PER_CASE - 1, len(results) - 1))
        for result in results:
            try:
                check_corpus.compare(case, result)
                verdict = None
            except check_corpus.Mismatch as e:
                verdict = str(e)
            entry["results"].append({"result": result, "mismatch": verdict})
        fixtures.append(entry)
    out = os.path.join(HERE, "matcher_fixtures.json")
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(fixtures, fh, separators=(",", ":"), ensure_ascii=False)
        fh.write("\n")
    n = sum(len(f["results"]) for f in fixtures)
    bad = sum(1 for f in fixtures for r in f["results"] if r["mismatch"])
    print(f"{out}: {len(fixtures)} cases, {n} results, {bad} mismatching")


if __name__ == "__main__":
    main(sys.argv[1:])
