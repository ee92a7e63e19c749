"""Which files of a verified manifest a deploy agent takes (policies.evidence.manifest)."""

from __future__ import annotations

import pytest

from policies.errors import InvalidValueError
from policies.evidence.manifest import FileRule, ManifestFile, SignedManifest, files_taken

DIGEST = "v2:" + "0" * 64
OPENSM = FileRule(
    frozenset({"opensm.conf", "partitions.conf", "qos-policy.conf"}),
    frozenset({"partitions.conf"}),
    by_base_name=True,
)
LEAF01 = FileRule(
    frozenset({"sonic/leaf01/config_db.json", "frr/leaf01/frr.conf"}),
    frozenset({"sonic/leaf01/config_db.json"}),
    others_refused=False,
)


def signed(*paths: str) -> SignedManifest:
    files = {p: ManifestFile(p, "a" * 64, 1) for p in paths}
    return SignedManifest("f", DIGEST, files, 1)


def test_an_opensm_host_takes_its_files_by_base_name_sorted():
    taken = files_taken(signed("opensm/qos-policy.conf", "opensm/partitions.conf"), OPENSM)
    assert [f.path for f in taken] == ["opensm/partitions.conf", "opensm/qos-policy.conf"]


def test_a_file_the_rule_does_not_take_is_refused_when_others_are_refused():
    with pytest.raises(InvalidValueError, match=r"'opensm/evil\.sh', not one of"):
        files_taken(signed("opensm/partitions.conf", "opensm/evil.sh"), OPENSM)


def test_a_leaf_takes_its_own_files_and_leaves_the_other_leaves_alone():
    manifest = signed("sonic/leaf01/config_db.json", "sonic/leaf02/config_db.json")
    assert [f.path for f in files_taken(manifest, LEAF01)] == ["sonic/leaf01/config_db.json"]


@pytest.mark.parametrize(
    ("paths", "rule"),
    [
        (("opensm/opensm.conf",), OPENSM),  # partitions.conf missing
        (("opensm/partitions.conf", "partitions.conf"), OPENSM),  # one base name twice
        (("frr/leaf01/frr.conf",), LEAF01),  # the leaf's config_db.json missing
    ],
)
def test_a_required_file_missing_or_a_name_twice_is_refused(paths, rule):
    with pytest.raises(InvalidValueError, match=r"must list .* and each file once"):
        files_taken(signed(*paths), rule)
