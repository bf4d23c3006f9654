"""perflab.core.kernel_version: kernel releases in version order."""

import random

from perflab.core.kernel_version import order_key, parse, sort_releases


def test_upstream_versions_in_numeric_order():
    releases = ["6.12.107", "6.1.176", "6.1.170", "6.12.117", "5.15.0", "6.9.0-rc1", "6.9.0", "6.8.0"]
    assert sort_releases(releases) == ["5.15.0", "6.1.170", "6.1.176", "6.8.0", "6.9.0-rc1", "6.9.0", "6.12.107",
                                       "6.12.117"]


def test_debian_abi_names_in_abi_order_without_uname_v():
    names = ["6.1.0-56-amd64", "6.1.0-47-amd64", "6.12.107+deb13-amd64", "6.1.0-50-amd64", "6.1.0-9-amd64"]
    assert sort_releases(names) == ["6.1.0-9-amd64", "6.1.0-47-amd64", "6.1.0-50-amd64", "6.1.0-56-amd64",
                                    "6.12.107+deb13-amd64"]


def test_debian_abi_name_mapped_to_its_upstream_version():
    found = parse("6.1.0-47-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.170-3 (2025-04-23)")
    assert (found.major, found.minor, found.patch, found.abi, found.flavour) == (6, 1, 170, 47, "amd64")
    assert found.upstream == "6.1.170"
    unknown = parse("6.1.0-47-amd64")
    assert not unknown.upstream_known and unknown.upstream == "6.1.0-47-amd64"
    versions = {"6.1.0-50-amd64": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.176-1 (2025-06-01)",
                "6.1.0-47-amd64": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.170-3 (2025-04-23)"}
    assert sort_releases(["6.1.0-50-amd64", "6.12.107", "6.1.0-47-amd64"], versions) == [
        "6.1.0-47-amd64", "6.1.0-50-amd64", "6.12.107"]


def test_flavours_of_one_release_stay_together():
    names = ["6.1.0-56-rt-amd64", "6.1.0-55-amd64", "6.1.0-56-cloud-amd64", "6.1.0-56-amd64"]
    ordered = sort_releases(names)
    assert ordered[0] == "6.1.0-55-amd64" and set(ordered[1:]) == {"6.1.0-56-amd64", "6.1.0-56-rt-amd64",
                                                                    "6.1.0-56-cloud-amd64"}


def test_uname_r_forms():
    assert parse("6.8.0-rc3-00123-gabcdef12").rc == 3
    assert parse("5.15.0-91-generic").abi == 91
    assert parse("6.5.0").patch == 0 and parse("6.5").patch == 0
    assert parse("not a kernel") is None and parse("") is None and parse(None) is None


def test_anything_sorts_without_error_and_non_releases_last():
    names = ["6.1.0-47-amd64", "weird", None, "6.1.170", "", "6.1.0-47-amd64"]
    for _ in range(5):
        random.shuffle(names)
        ordered = sorted(names, key=order_key)
        assert ordered[:3] == ["6.1.0-47-amd64", "6.1.0-47-amd64", "6.1.170"]
        assert set(ordered[-3:]) == {"weird", None, ""}
