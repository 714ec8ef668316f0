"""The policy file's `slurm:` section: defaults, and errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fairshare.errors import InputError
from fairshare.inputs._validation import validate
from fairshare.inputs.policy import Policy, load_policy
from fairshare.slurm.accounts import AccountMap, account_plan, leaf_accounts, sacctmgr_commands

ROOT = Path(__file__).resolve().parents[2]


def policy(slurm: dict[str, Any] | None = None, **over: Any) -> Policy:
    data: dict[str, Any] = {
        "gpu_rates": {"A100": 1.0, "H100": 2.0},
        "tree": [
            {"name": "Product", "share": 50},
            {
                "name": "research",
                "share": 50,
                "children": [{"name": "vision", "share": 2}, {"name": "nlp", "share": 1}],
            },
        ],
        "classes": {"train": {"protected": "1h", "max_protected": "2h"}, "debug": {"protected": "5m"}},
        **over,
    }
    if slurm is not None:
        data["slurm"] = slurm
    return validate(Policy, data, "p.yaml")


def error(slurm: dict[str, Any], **over: Any) -> InputError:
    with pytest.raises(InputError) as info:
        policy(slurm, **over)
    return info.value


def test_example_policy_is_valid_and_maps_its_three_leaves() -> None:
    p = load_policy(ROOT / "examples" / "slurm-policy.yaml")
    assert p.slurm is not None and p.slurm.default_class == "train"
    assert leaf_accounts(p) == {"product": "product", "research": "research", "platform": "platform"}


def test_a_policy_without_the_section_still_loads_and_maps_leaves_by_lower_case_name() -> None:
    p = policy()
    assert p.slurm is None
    assert leaf_accounts(p) == {"product": "Product", "vision": "research/vision", "nlp": "research/nlp"}


def test_account_plan_mirrors_the_tree_with_parents_first() -> None:
    plan = account_plan(policy({"accounts": {"research/nlp": "lang"}}))
    assert [(a.name, a.parent, a.fairshare, a.leaf_path) for a in plan] == [
        ("product", "root", 50, "Product"),
        ("research", "root", 50, None),
        ("vision", "research", 2, "research/vision"),
        ("lang", "research", 1, "research/nlp"),
    ]
    cmds = sacctmgr_commands(plan, users=["root"], qos=["train"])
    assert cmds[0][:5] == ["sacctmgr", "-i", "add", "account", "product"]
    assert ["sacctmgr", "-i", "add", "user", "root", "account=lang", "qos=normal,train"] in cmds
    assert not any(c[3] == "user" and c[5] == "account=research" for c in cmds)  # inner: no users


def test_fractional_shares_are_scaled_to_integer_fairshare() -> None:
    p = policy(tree=[{"name": "a", "share": 1.5}, {"name": "b", "share": 0.5}])
    assert [a.fairshare for a in account_plan(p)] == [150, 50]


def test_sub_accounts_charge_their_leaf_and_unknown_accounts_are_named() -> None:
    m = AccountMap.build(policy(), parents={"vision-interns": "vision", "vision": "research", "ops": "root"})
    assert m.leaf_of("vision") == ("research/vision", "")
    assert m.leaf_of("VISION-interns") == ("research/vision", "sub-account of vision")
    leaf, why = m.leaf_of("ops")
    assert leaf is None and "'ops' maps to no leaf" in why and "not ordered or charged" in why
    leaf, why = m.leaf_of("research")
    assert leaf is None and "budget group 'research', not a leaf" in why


@pytest.mark.parametrize(
    ("slurm", "at", "words"),
    [
        ({"accounts": {"research": "r"}}, "slurm.accounts.research", "is an inner node"),
        ({"accounts": {"nope": "r"}}, "slurm.accounts.nope", "not in the tree"),
        ({"accounts": {"Product": "Bad Name"}}, "slurm.accounts.Product", "not a Slurm account name"),
        ({"accounts": {"Product": "nlp"}}, "slurm.accounts", "both map to Slurm account 'nlp'"),
        ({"default_class": "eval"}, "slurm.default_class", "unknown class 'eval'"),
        ({"qos_classes": {"long": "eval"}}, "slurm.qos_classes.long", "unknown class 'eval'"),
        ({"gpu_types": {"a100": "V100"}}, "slurm.gpu_types.a100", "not a key of gpu_rates"),
        ({"priority_min": 10, "priority_max": 5}, "slurm.priority_max", "must be above priority_min"),
        ({"priority_max": 2**32}, "slurm.priority_max", "must be <="),
        ({"comment_prefix": "fair share"}, "slurm.comment_prefix", "may not contain spaces"),
        ({"partition": ["gpu"]}, "slurm.partition", "unknown key 'partition'; did you mean 'partitions'"),
    ],
)
def test_bad_slurm_sections_name_the_key(slurm: dict[str, Any], at: str, words: str) -> None:
    e = error(slurm)
    assert e.at == at
    assert words in e.message
