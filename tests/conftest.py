import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Overflow and domain errors are expected in several tests; NumPy's RuntimeWarnings
# about them are noise there.
np.seterr(all="ignore")


# CI runs the suite twice: first as the README's command runs it (without the oracle and
# engine extras), then, with them installed, only what the first run skipped. Every test
# that needs an extra skips without it, so the second run adds each comparison once instead
# of running again whole every file that holds one. The skips are kept in pytest's cache:
# a test's id where it skipped, a file's where the whole module skipped.
SKIPPED = "gradcalc/skipped"
_skipped: set[str] = set()


def pytest_addoption(parser):
    parser.addoption("--only-skipped", action="store_true",
                     help="run only the tests (and files) that the last run skipped (CI's oracle pass)")


def pytest_collectreport(report):
    if report.skipped:
        _skipped.add(report.nodeid)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.add(report.nodeid)


def pytest_sessionfinish(session):
    config = session.config
    # xdist's controller sees every worker's reports; a worker would write only its part
    if not hasattr(config, "workerinput") and not config.getoption("--only-skipped") and getattr(config, "cache", None):
        config.cache.set(SKIPPED, sorted(_skipped))


def pytest_collection_modifyitems(config, items):
    if config.getoption("--only-skipped"):
        _keep_only_the_skipped(config, items)
    # The long tests first: xdist hands tests out in this order, so the two workers of a
    # two-core run end on short ones together instead of one waiting minutes for the other.
    # A file whose module fixture is costly keeps its tests on one worker with
    # `pytestmark = pytest.mark.xdist_group(...)` (addopts' --dist loadgroup).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _keep_only_the_skipped(config, items):
    cache = getattr(config, "cache", None)
    if cache is None:
        raise pytest.UsageError("--only-skipped reads pytest's cache: drop -p no:cacheprovider")
    recorded = cache.get(SKIPPED, None)
    if recorded is None:
        raise pytest.UsageError("--only-skipped: pytest's cache holds no earlier run's skips; run the suite first")
    wanted = {_ungrouped(nodeid) for nodeid in recorded}
    keep, drop = [], []
    for item in items:
        nodeid = _ungrouped(item.nodeid)
        (keep if nodeid in wanted or nodeid.split("::")[0] in wanted else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _ungrouped(nodeid):
    """A test's id without the `@group` xdist's loadgroup puts after it in a worker (the
    recorded reports have it; an item being collected may not yet), as xdist reads it: an
    `@` after the parameters' closing bracket."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid
