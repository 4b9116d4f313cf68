"""Shared by every test package: the Hypothesis settings every run uses. (tests/ is a
package: helper modules are imported as ``tests.dledger_helpers``, ``tests.cli.cli_helpers``.)"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# One Hypothesis profile, CI's and everyone's: no deadline and no too-slow health check.
# Both time examples, and two test processes on CI's two cores (or a shared machine) make a
# fast example slow now and then: a 200 ms deadline failed a right test at 209 ms
# (tests/unit/broker/test_namesrv_config.py). Tests keep their own max_examples; a hang is
# pytest-timeout's to catch (pyproject.toml). A failure prints its @reproduce_failure blob.
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("ci")
