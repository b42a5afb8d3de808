"""Shared pytest fixtures for jaxcore's tests."""

import os

# Fake 4 CPU devices so sharding / shard_map tests can run on one host.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import pytest  # noqa: E402

# Warm starts: compiled programs persist across test runs (and between the two xdist workers) in JAX's
# persistent compilation cache under the jaxcore cache. JAXCORE_COMPILE_CACHE=0 runs cold (budgets are cold).
import jaxcore  # noqa: E402

jaxcore.enable_compilation_cache()


@pytest.fixture
def x64():
    """Run the test body with 64-bit JAX arrays (oracle tests); restored afterwards."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def key():
    """A fixed PRNG key."""
    return jax.random.key(0)


# Hypothesis profiles (DESIGN "Tests"): "light" by default (few examples drawn from small fixed shape
# sets, so examples do not recompile); "deep" for the slow run (HYPOTHESIS_PROFILE=deep).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "light", max_examples=12, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "deep", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "light"))


import contextlib  # noqa: E402


@contextlib.contextmanager
def _count_compiles():
    events = []

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            events.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@pytest.fixture
def compiles():
    """``with compiles() as c: ...``; then ``len(c)`` is the number of XLA compilations in the block."""
    return _count_compiles


# Findings of the deep fuzzing profile (pytest -m slow, 40 examples) on the commit that added it, not yet
# fixed: each is a real refusal gap that the light profile does not reach. Marked here, in one place, as
# non-strict xfails with what was found, so the slow run reports them (XFAIL/XPASS) until they are fixed.
KNOWN_DEEP_FUZZ_FINDINGS: dict[str, str] = {}  # all eight findings of the first deep run are fixed


# The costliest tests of the default run (seconds on the idle 2-core machine, cold, 2026-12-01), moved to the
# slow run (`pytest -m slow`, which .ci/run also runs) to keep the README's `pytest` inside its 10 minutes
# once the lm, watermark, effects, graphs and rl families arrived. Each still runs in CI; a test that gets
# cheaper can come back by leaving this table.
MOVED_TO_SLOW = {
    "jaxcore/rl/__init__.py::jaxcore.rl": 21.7,
    "jaxcore/graphs/__init__.py::jaxcore.graphs": 21.5,
    "tests/graphs/test_sparsifier.py::test_resampling_rule_and_unbiased_after_update": 13.6,
    "tests/causal/test_fuzz.py::test_fuzz[samplers]": 12.9,
    "jaxcore/bnp/__init__.py::jaxcore.bnp": 12.0,
    "tests/bnp/test_model.py::test_elbo_gradient_matches_finite_differences": 11.6,
    "tests/tpp/test_njdtpp.py::test_gradient_matches_finite_differences": 11.5,
    "tests/tpp/test_api.py::test_second_call_with_the_same_shapes_does_not_recompile": 11.5,
    "tests/ipm/test_generators.py::test_dp_bounds_hold_for_coupled_approximations": 11.2,
    "tests/tpp/test_api.py::test_train_is_key_first_and_returns_its_history": 11.2,
    "tests/causal/test_mcmc.py::test_order_mcmc_reaches_order_modular_posterior": 10.7,
    "tests/tpp/test_solver.py::test_padding_vmap_and_gradient": 10.2,
    "tests/bnp/test_model.py::test_elbo_and_gradient_finite[0.05]": 9.9,
    "tests/bnp/test_model.py::test_make_svi_step_is_value_and_grad_of_elbo_then_adam": 9.8,
    "tests/causal/test_fuzz.py::test_fuzz[graphs]": 9.8,
    "tests/bnp/test_hardening.py::test_fit_traced_learning_rate_and_task_checked_once_at_run_time": 9.7,
    "tests/inverse/test_restoration.py::test_traced_arguments_are_checked_once_before_the_loop": 9.2,
    "tests/tpp/test_api.py::test_evaluate_matches_its_parts": 8.9,
    "tests/bnp/test_hardening.py::test_fit_refuses_negative_learning_rate_bad_labels_and_tasks": 8.6,
    "tests/bnp/test_model.py::test_fit_result_history_progress_and_no_recompile": 8.5,
    "tests/tpp/test_solver.py::test_scan_euler_converges_at_first_order_and_matches_diffrax_euler": 8.4,
    "jaxcore/bnp/continual.py::jaxcore.bnp.continual.run_continual": 8.4,
    "tests/tpp/test_hardening.py::test_njdtpp_long_gap_is_finite_and_matches_the_closed_form": 8.1,
    "tests/tpp/test_solver.py::test_diffrax_reproduces_self_correcting_and_poisson": 8.1,
    "tests/tpp/test_api.py::test_shared_decay_hawkes_fit_recovers_parameters": 8.1,
    "jaxcore/causal/__init__.py::jaxcore.causal": 8.1,
    "tests/watermark/test_processors.py::test_dipmark_step_equals_the_reweight_of_its_permutation": 8.0,
    "jaxcore/rl/baselines.py::jaxcore.rl.baselines.reset_psdp": 8.0,
    "tests/graphs/test_contracted.py::test_matrix_is_ytay_through_updates": 7.9,
    "tests/ipm/test_hardening.py::test_half_precision_computed_in_float32[float16]": 7.8,
    "tests/tpp/test_neural.py::test_iftpp_log_normal_mixture_matches_scipy": 7.7,
    "tests/causal/test_mcmc.py::test_progress_reports_draws_and_leaves_the_chain_unchanged[structure]": 7.7,
    "tests/causal/test_latent.py::test_dibs_svi_finds_chain_skeleton": 7.6,
    "tests/tpp/test_solver.py::test_default_scheme_reproduces_the_classical_likelihoods": 7.5,
    "tests/sam/test_trainer.py::test_train_equals_a_loop_of_steps_and_keeps_its_history": 7.4,
    "jaxcore/tpp/__init__.py::jaxcore.tpp": 7.2,
    "tests/causal/test_latent.py::test_dibs_svi_progress_callback_and_result": 6.9,
    "tests/sam/test_trainer.py::test_multi_device_synchronised_equals_concatenated_batch": 6.9,
    "tests/sam/test_hardening.py::test_global_norm_zero_and_gradients_stay_finite": 6.8,
    "jaxcore/graphs/dynamic.py::jaxcore.graphs.dynamic.init_clustering": 6.8,
    "tests/bnp/test_model.py::test_vmapped_samples_equal_average_of_single_samples": 6.6,
    "jaxcore/tpp/sahp.py::jaxcore.tpp.sahp.SAHP": 6.6,
    "tests/causal/test_bootstrap.py::test_bootstrap_each_draw_is_the_map_of_its_resample": 6.5,
    "tests/sam/test_trainer.py::test_base_optimizer_path_equals_optax": 6.5,
    "tests/causal/test_dynamic_programming.py::test_dp_equals_enumeration[5]": 6.4,
    "tests/watermark/test_processors.py::test_full_table_keeps_watermarking": 6.4,
    "tests/bnp/test_model.py::test_vcl_switch_equals_fixed_structure_model": 6.3,
    "tests/causal/test_mcmc.py::test_progress_reports_draws_and_leaves_the_chain_unchanged[order]": 6.3,
    "jaxcore/watermark/processors.py::jaxcore.watermark.processors.DiPmark": 6.2,
    "tests/watermark/test_detection.py::test_watermarked_text_from_logits_is_detected_and_substitution_weakens_it": 6.1,
    "tests/tpp/test_solver.py::test_exact_flow_reproduces_closed_forms_and_is_stable": 6.1,
    "tests/bnp/test_model.py::test_hard_masks_threshold_on_expected_pi": 6.0,
    "tests/watermark/test_bias.py::test_two_rounds_are_detectably_biased_six_are_not_at_this_resolution": 5.9,
    "jaxcore/causal/mcmc.py::jaxcore.causal.mcmc.order_mcmc": 5.9,
    "tests/tpp/test_neural.py::test_rmtpp_reproduces_a_closed_form_renewal_likelihood": 5.8,
    "tests/tpp/test_solver.py::test_diffrax_reproduces_hawkes_closed_form": 5.8,
    "tests/bnp/test_kl.py::test_kl_beta_closed_form_matches_numpyro_and_monte_carlo[2.0-1.0-2.0-1.0]": 5.8,
    "tests/bnp/test_hardening.py::test_kl_beta_gradient_matches_textbook_form": 5.7,
    "tests/watermark/test_processors.py::test_two_step_sequence_distribution_is_preserved_on_a_tiny_model": 5.7,
    "tests/inverse/test_operators.py::test_adjoint_identity_property": 5.6,
    "tests/inverse/test_training.py::test_scanned_training_equals_the_step_by_step_recipe": 5.5,
    "tests/tpp/test_njdtpp.py::test_njdtpp_fused_drift_jacobian_matches_the_generic_jvp": 5.4,
    "tests/causal/test_dynamic_programming.py::test_dp_equals_enumeration[3]": 5.4,
    "tests/tpp/test_njdtpp.py::test_untrained_model_is_close_to_poisson_and_conventions_differ": 5.4,
    "jaxcore/rl/baselines.py::jaxcore.rl.baselines.behaviour_cloning": 5.3,
    "tests/sam/test_trainer.py::test_jit_equals_no_jit": 5.2,
    "tests/inverse/test_restoration.py::test_snore_converges_to_gaussian_closed_form[False-blur]": 5.2,
    "tests/sam/test_trainer.py::test_rho_zero_reproduces_base_optimizer_exactly[pert0]": 5.2,
    "jaxcore/bnp/inference.py::jaxcore.bnp.inference.make_svi_step": 5.1,
    "tests/causal/test_posterior.py::test_mec_log_posterior_bruteforce[4]": 5.1,
    "tests/causal/test_mcmc.py::test_structure_mcmc_reaches_exact_posterior": 5.1,
    "jaxcore/causal/latent.py::jaxcore.causal.latent.dibs_svi": 5.1,
    "tests/causal/test_dynamic_programming.py::test_dp_in_degree_bound_equals_enumeration": 5.0,
    "tests/inverse/test_denoisers.py::test_dncnn_shapes_batching_and_gray": 4.9,
    "tests/sam/test_trainer.py::test_equinox_batchnorm_state_comes_from_clean_pass": 4.7,
    "tests/graphs/test_graph.py::test_insert_matches_numpy_and_grows_by_doubling": 4.7,
    "tests/causal/test_metrics.py::test_predictive_and_interventional_nll": 4.7,
    "tests/inverse/test_operators.py::test_adjoint_identity[gaussian]": 4.6,
    # added 2026-12-01 (evening), the costliest default tests of a run under load (3 processes on 2 cores,
    # seconds of that run, about twice the idle figure), when the default run reached 10.8 min idle
    "tests/distributed/test_sharded_alignment.py::test_chunked_internals_shard_sequences[mean_hidden]": 19.7,
    "tests/ipm/test_two_sample.py::test_statistic_and_null_match_direct_computation[dlip]": 19.0,
    "tests/ipm/test_generators.py::test_second_call_with_same_shapes_does_not_recompile": 18.8,
    "tests/lm/test_fuzz.py::test_fuzz_processors": 17.6,
    "tests/alignment/test_dpo.py::test_full_batch_fit_equals_repeated_steps_and_lowers_the_loss": 17.6,
    "tests/bnp/test_continual.py::test_run_continual_progress_reports_each_task_and_changes_nothing[finetune]": 17.1,
    "tests/lm/test_decoding.py::test_greedy_and_eos": 15.6,
    "tests/alignment/test_interventions.py::test_subtract_direction_shifts_the_last_stream": 15.1,
    "tests/causal/test_score_table.py::test_no_recompile_on_second_call": 15.1,
    "tests/ipm/test_two_sample.py::test_identical_samples_give_p_one_and_shifted_give_min_p": 15.0,
    "tests/lm/test_fuzz.py::test_fuzz_generate": 14.3,
    "jaxcore/rl/baselines.py::jaxcore.rl.baselines.online_psdp": 14.0,
    # added 2026-12-02, the next costliest of the same loaded run (the default run was 12.2 min cold, idle)
    "tests/lm/test_fuzz.py::test_fuzz_scoring": 12.0,
    "tests/ipm/test_generators.py::test_hierarchical_gaussian_moments": 11.2,
    "tests/lm/test_decoding.py::test_cached_logits_equal_full_forward_at_every_position": 11.1,
    "tests/ipm/test_wasserstein.py::test_inner_costs_and_wow_match_pot[2.0]": 11.0,
    "tests/lm/test_head.py::test_value_and_gradient_float64[saved-True]": 10.9,
    "tests/ipm/test_two_sample.py::test_statistic_and_null_match_direct_computation[lower_bound]": 10.7,
    "tests/ipm/test_hardening.py::test_half_precision_computed_in_float32[bfloat16]": 10.3,
    "tests/distributed/test_sharded_tpp.py::test_exact_hawkes_likelihood_shards_sequences": 10.2,
    "tests/inverse/test_restoration.py::test_loop_trusts_only_the_values_it_checked": 10.2,
    "tests/distributed/test_sharded_lm.py::test_generate_top_k_shards_prompts": 10.2,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in MOVED_TO_SLOW:
            item.add_marker(pytest.mark.slow)
        reason = KNOWN_DEEP_FUZZ_FINDINGS.get(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"known deep-fuzz finding: {reason}", strict=False))


# Every compiled XLA:CPU program maps its code, and a pytest-xdist worker that runs hundreds of tests keeps
# every program it compiled: past vm.max_map_count (65,530 on Linux) the next program's load fails and the
# worker dies in XLA (a slow run lost a worker this way at about 65 k mappings, in the compilation cache's
# deserialisation). After each test module, a worker above MAX_MAPPINGS drops JAX's compiled programs, as the
# benchmark harness does between families (benchmarks.runner.release_compiled).
MAX_MAPPINGS = 30_000


def _memory_maps() -> int:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux: no such limit to watch
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs_when_maps_run_high():
    yield
    if _memory_maps() > MAX_MAPPINGS:
        import gc

        jax.clear_caches()
        gc.collect()


# ----------------------------------------------------------------------------------------------- budgets
# The time guard (tests/README.md, "Budgets"): a default test (not marked slow) whose call -- its body
# with its first compile, fixtures apart -- uses more than TEST_TIME_LIMIT_S seconds of CPU time fails, so
# that a slow test cannot creep into the README's `pytest` unnoticed: make it cheaper or mark it slow. CPU
# time (the process's, all its threads) rather than wall time, so that a loaded machine, where wall time
# stretches, does not fail a test that an idle one passes; JAXCORE_TEST_LIMIT_S overrides the limit (0
# switches the guard off). Slow tests are not guarded (the slow run has its own budget).
TEST_TIME_LIMIT_S = float(os.environ.get("JAXCORE_TEST_LIMIT_S", "60"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    import time

    t0 = time.process_time()
    try:
        yield
    finally:
        item.stash[_CPU_S] = time.process_time() - t0


_CPU_S = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cpu = item.stash.get(_CPU_S, 0.0)
    if (call.when == "call" and report.passed and TEST_TIME_LIMIT_S > 0
            and cpu > TEST_TIME_LIMIT_S and item.get_closest_marker("slow") is None):
        report.outcome = "failed"
        report.longrepr = (f"time guard: this default test used {cpu:.1f} s of CPU time ({call.duration:.1f} s "
                           f"wall), over the limit of {TEST_TIME_LIMIT_S:.0f} s for one test of the README's "
                           f"`pytest` (its first compile included, fixtures apart; tests/README.md, 'Budgets'). "
                           f"Make it cheaper, or mark it slow (MOVED_TO_SLOW in tests/conftest.py) so that it "
                           f"runs in `pytest -m slow`.")


# Per-test durations for the budget table (scripts/budget.py): with JAXCORE_TEST_DURATIONS=<folder> set,
# the run writes <folder>/tests-<slow|default>.json, every test's setup + call + teardown seconds by node id,
# collected in the controlling process (pytest-xdist workers report to it).
_DURATIONS: dict[str, float] = {}
_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report):
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + float(report.duration)
    if report.when == "call" or report.outcome != "passed":
        _OUTCOMES[report.nodeid] = report.outcome


def pytest_sessionfinish(session, exitstatus):
    folder = os.environ.get("JAXCORE_TEST_DURATIONS")
    if not folder or hasattr(session.config, "workerinput"):  # only the controlling process writes
        return
    import json
    import pathlib
    import time

    mark = session.config.getoption("markexpr", "") or ""
    tag = "slow" if mark.strip() == "slow" else "default"
    out = pathlib.Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"run": tag, "markexpr": mark, "exitstatus": int(exitstatus), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
           "durations_s": _DURATIONS, "outcomes": _OUTCOMES}
    (out / f"tests-{tag}.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
