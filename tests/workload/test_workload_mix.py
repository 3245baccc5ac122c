"""Tenants and classes: shares, own schedules, repeats, sessions, prefixes, SLOs, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.workload import generate_arrays, generate_requests, workload_from_dict
from servecap.workload.mix import traffic_classes
from servecap.workload.popularity import draw_popular, zipf_probs

MIX: dict[str, Any] = {
    "arrival": {"kind": "poisson", "rate_per_s": 40},
    "prompt_tokens": {"kind": "lognormal", "median": 400, "sigma": 0.7},
    "output_tokens": 120,
    "prefix": {"groups": 2, "tokens": 800, "share": 0.5},
    "num_requests": 40_000,
    "tenants": [
        {
            "name": "acme",
            "share": 3,
            "sessions": {"count": 500, "zipf_s": 1.0},
            "classes": [
                {
                    "name": "chat",
                    "share": 0.75,
                    "repeats": {"rate": 0.3, "groups": 50, "zipf_s": 1.0},
                    "slo": {"ttft_s": {"p99": 1.0}, "tpot_s": {"p99": 0.05, "p50": 0.02}},
                },
                {"name": "batch", "share": 0.25, "priority": 5, "prefix": {"groups": 4, "tokens": 300, "zipf_s": 1.2}},
            ],
        },
        {"name": "light", "sessions": {"count": 20}, "classes": [{"name": "chat", "output_tokens": 30}]},
        {
            "name": "nightly",
            "arrival": {
                "kind": "schedule",
                "rate": {
                    "kind": "piecewise",
                    "steps": [{"start_s": 0, "rate_per_s": 0}, {"start_s": 100, "rate_per_s": 20}],
                },
            },
            "priority": 9,
        },
    ],
}


def _arrays(raw: dict[str, Any] = MIX, seed: int = 5) -> Any:
    return generate_arrays(workload_from_dict(raw), np.random.default_rng(seed))


def test_shares_split_the_shared_arrival() -> None:
    a = _arrays({**MIX, "tenants": MIX["tenants"][:2]})
    assert a.tenant_names == ("acme", "light")
    assert a.class_names == ("chat", "batch")
    frac_acme = np.mean(a.tenant == 0)
    assert frac_acme == pytest.approx(0.75, abs=0.01)  # shares 3 : 1
    acme = a.tenant == 0
    assert np.mean(a.request_class[acme] == 1) == pytest.approx(0.25, abs=0.01)
    assert np.all(a.request_class[a.tenant == 1] == 0)  # light has only "chat"
    # light's class overrides output_tokens; acme's inherits the workload's
    assert np.all(a.output_tokens[a.tenant == 1] == 30)
    assert np.all(a.output_tokens[acme] == 120)


def test_a_tenant_with_its_own_schedule() -> None:
    a = _arrays()
    nightly = a.tenant == 2
    assert a.tenant_names[2] == "nightly"
    assert np.all(a.arrival_s[nightly] >= 100.0)  # its rate is zero before t = 100 s
    assert np.all(a.priority[nightly] == 9)
    assert np.all(np.diff(a.arrival_s) >= 0)  # streams merged in time order
    assert len(a) == 40_000


def test_repeats_are_exact_duplicates() -> None:
    a = _arrays()
    chat_acme = (a.tenant == 0) & (a.request_class == 0)
    dup = a.duplicate_group
    assert np.all(dup[~chat_acme] == -1)
    assert np.mean(dup[chat_acme] >= 0) == pytest.approx(0.3, abs=0.015)
    for g in np.unique(dup[dup >= 0])[:20]:
        rows = np.flatnonzero(dup == g)
        for col in (a.prompt_tokens, a.output_tokens, a.prefix_group, a.prefix_tokens):
            assert len(set(col[rows].tolist())) == 1
    # Zipf: question 0 is the most asked
    counts = np.bincount(dup[dup >= 0])
    assert counts.argmax() == 0


def test_sessions_prefixes_and_priorities() -> None:
    a = _arrays()
    s_acme = a.session_id[a.tenant == 0]
    s_light = a.session_id[a.tenant == 1]
    assert s_acme.min() >= 0 and s_acme.max() < 500
    assert s_light.min() >= 500 and s_light.max() < 520  # per-tenant id ranges never collide
    assert np.all(a.session_id[a.tenant == 2] == -1)  # nightly has no sessions
    assert np.bincount(s_acme).argmax() == 0  # zipf_s = 1: user 0 is the heaviest
    # the top-level prefix groups 0..1 are shared; acme/batch's own groups are 2..5
    batch = a.request_class == 1
    assert set(np.unique(a.prefix_group[batch]).tolist()) == {2, 3, 4, 5}
    assert set(np.unique(a.prefix_group[~batch]).tolist()) <= {-1, 0, 1}
    assert np.all(a.prompt_tokens >= a.prefix_tokens + 1)
    assert np.all(a.priority[batch] == 5) and np.all(a.priority[(a.tenant == 0) & ~batch] == 0)


def test_request_specs_carry_the_names() -> None:
    reqs = generate_requests(workload_from_dict({**MIX, "num_requests": 200}), np.random.default_rng(1))
    tenants = {r.tenant for r in reqs}
    assert tenants <= {"acme", "light", "nightly"} and "acme" in tenants
    assert {r.request_class for r in reqs} <= {"chat", "batch"}
    assert all(r.session_id is not None for r in reqs if r.tenant != "nightly")
    assert any(r.duplicate_group is not None for r in reqs)


def test_same_seed_same_arrays() -> None:
    a, b, c = _arrays(seed=3), _arrays(seed=3), _arrays(seed=4)
    cols = ("arrival_s", "prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens", "tenant")
    cols += ("request_class", "session_id", "duplicate_group", "priority")
    for col in cols:
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_traffic_classes_give_slo_targets() -> None:
    classes = traffic_classes(workload_from_dict(MIX))
    assert [(c.tenant, c.name, c.priority) for c in classes] == [
        ("acme", "chat", 0),
        ("acme", "batch", 5),
        ("light", "chat", 0),
        ("nightly", "default", 9),
    ]
    assert classes[0].slo_targets == (("ttft_s", 99.0, 1.0), ("tpot_s", 99.0, 0.05), ("tpot_s", 50.0, 0.02))


def test_without_tenants_the_new_columns_say_none() -> None:
    raw = {"arrival": {"kind": "poisson", "rate_per_s": 5}, "prompt_tokens": 10, "output_tokens": 5, "num_requests": 3}
    a = _arrays(raw)
    assert a.tenant.tolist() == [-1, -1, -1] and a.duplicate_group.tolist() == [-1, -1, -1]
    assert a.priority.tolist() == [0, 0, 0]
    r = a.to_requests()[0]
    assert (r.tenant, r.request_class, r.session_id, r.duplicate_group) == (None, None, None, None)


def test_zipf_by_hand() -> None:
    # k = 3, s = 1: 1, 1/2, 1/3 over 11/6 -> 6/11, 3/11, 2/11
    assert zipf_probs(3, 1.0) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    draws = draw_popular(np.random.default_rng(0), 3, 1.0, 110_000)
    assert np.bincount(draws) / 110_000 == pytest.approx([6 / 11, 3 / 11, 2 / 11], abs=0.005)
    # s = 0 is the uniform draw the prefix groups always used (same stream as before)
    assert np.array_equal(
        draw_popular(np.random.default_rng(9), 7, 0.0, 50), np.random.default_rng(9).integers(0, 7, 50)
    )


@pytest.mark.parametrize(
    ("tenants", "top", "field", "text"),
    [
        ([{"name": "a", "clases": []}], {}, "workload.tenants.0", "did you mean: classes"),
        ([{"name": "a", "share": -1}], {}, "workload.tenants.0.share", "greater than 0"),
        ([{"name": "a"}, {"name": "a"}], {}, "workload", "tenant 'a' is named twice"),
        (
            [{"name": "a", "classes": [{"name": "x"}, {"name": "x"}]}],
            {},
            "workload.tenants.0",
            "class 'x' is named twice",
        ),
        (
            [{"name": "a", "classes": [{"name": "x", "repeat": {}}]}],
            {},
            "workload.tenants.0.classes.0",
            "did you mean: repeats",
        ),
        (
            [{"name": "a", "classes": [{"name": "x", "slo": {"ttft_s": {"99": 1}}}]}],
            {},
            "workload.tenants.0.classes.0.slo.ttft_s",
            "not a percentile key",
        ),
        (
            [{"name": "a", "classes": [{"name": "x", "slo": {"ttft_s": {"p99": 0}}}]}],
            {},
            "workload.tenants.0.classes.0.slo.ttft_s",
            "must be > 0",
        ),
        (
            [{"name": "a", "classes": [{"name": "x", "repeats": {"rate": 1.5}}]}],
            {},
            "workload.tenants.0.classes.0.repeats.rate",
            "less than or equal to 1",
        ),
        (
            [{"name": "a", "sessions": {"count": 0}}],
            {},
            "workload.tenants.0.sessions.count",
            "greater than or equal to 1",
        ),
        ([{"name": "a"}], {"arrival": None}, "workload", "has no 'arrival' of its own"),
        (
            [{"name": "a", "arrival": {"kind": "poisson", "rate_per_s": 1}}],
            {},
            "workload",
            "drop the workload's 'arrival'",
        ),
        (
            [{"name": "a", "share": 1, "arrival": {"kind": "poisson", "rate_per_s": 1}}],
            {"arrival": None},
            "workload.tenants.0",
            "not both",
        ),
        ([{"name": "a"}], {"prompt_tokens": None}, "workload", "class 'default' has no 'prompt_tokens'"),
        ([{"name": "a"}], {"users": {"count": 3}, "arrival": None}, "workload", "drop 'users'"),
    ],
)
def test_bad_mixes_name_the_field(tenants: list[dict[str, Any]], top: dict[str, Any], field: str, text: str) -> None:
    raw: dict[str, Any] = {
        "arrival": {"kind": "poisson", "rate_per_s": 1},
        "prompt_tokens": 1,
        "output_tokens": 1,
        "num_requests": 1,
        "tenants": tenants,
    }
    raw.update(top)
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ServecapError, match=text) as err:
        workload_from_dict(raw)
    assert err.value.field == field


def test_the_documented_day_of_two_tenants() -> None:
    """docs/workload.md's example parses, and its day has the documented shape."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[2] / "docs" / "workload.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "a day of two tenants" in b)
    spec = workload_from_dict(yaml.safe_load(block))
    a = generate_arrays(spec, np.random.default_rng(0))
    assert a.tenant_names == ("acme", "batchco")
    batch_t = a.arrival_s[a.tenant == 1] % 86_400
    assert np.all((batch_t < 21_600) | (batch_t >= 79_200))  # only at night
    expected_batch = 5 * (21_600 + 7_200)
    assert abs(len(batch_t) - expected_batch) < 5 * np.sqrt(expected_batch)
    faq = a.request_class == a.class_names.index("faq")
    assert np.mean(a.duplicate_group[faq] >= 0) == pytest.approx(0.4, abs=0.01)
