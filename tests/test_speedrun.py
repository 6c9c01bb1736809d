"""Lesson 10's lab (course_utils/lab/speedrun.py, speedrun_report.py) on its CPU path, and the
statistics the lesson's table rests on, fed simulated timings with a known difference and none."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils import speedrun

from .solutions import solution

speedup_with_interval = solution("10_speedrun", "speedup_with_interval")
verdict = solution("10_speedrun", "verdict")
SIMULATED = 200  # pairs of rows per simulation: a 95 % rate is then known within about 3 %


@pytest.fixture(scope="module")
def corpus():
    return speedrun.load_corpus(max_chars=20_000)


# ------------------------------------------------------------------ the statistics

@pytest.fixture(scope="module")
def simulated():
    """Pairs of 5 runs with 5 % log-normal noise: the same row twice, and a 1.25x speed-up."""
    same = np.random.default_rng(10).lognormal(0.0, 0.05, size=(SIMULATED, 2, 5))
    faster = same * np.array([1.0, 1 / 1.25])[None, :, None]
    return same, faster


def test_no_difference_is_rarely_called_faster_and_a_real_one_nearly_always(simulated):
    same, faster = simulated
    false_alarms = np.mean([verdict(b, a) == "faster" for b, a in same])
    detected = np.mean([verdict(b, a) == "faster" for b, a in faster])
    assert 0.01 <= false_alarms <= 0.10  # alpha = 5 %, one-sided
    assert detected >= 0.97


def test_the_speedup_interval_covers_the_true_ratio_95_percent_of_the_time(simulated):
    for pairs, truth in zip(simulated, (1.0, 1.25), strict=True):
        intervals = [speedup_with_interval(b, a) for b, a in pairs]
        covered = np.mean([low <= truth <= high for _, low, high in intervals])
        assert 0.90 <= covered <= 0.99, (truth, covered)


def test_the_row_interval_covers_the_true_geometric_mean_95_percent_of_the_time():
    # times drawn log-normal around 2 s with a 30 % spread: skewed, as run times are
    runs = np.random.default_rng(11).lognormal(np.log(2.0), 0.3, size=(SIMULATED, 5))
    intervals = list(map(speedrun.geometric_interval, runs))
    covered = np.mean([i.low <= 2.0 <= i.high for i in intervals])
    assert 0.90 <= covered <= 0.99
    assert min(i.low for i in intervals) > 0  # a time's interval never reaches below zero


def test_one_slow_run_widens_the_interval_without_taking_it_below_zero():
    # the H200 reference run of 27 Nov: Student's interval of the raw times was [-0.044, 0.581]
    interval = speedrun.geometric_interval([0.12, 0.13, 0.12, 0.14, 0.83])
    assert 0 < interval.low < 0.12 and interval.high > 0.3


def test_geometric_interval_refuses_what_it_cannot_summarise():
    with pytest.raises(ValueError, match="at least 2 positive finite numbers, got \\[1.0\\]"):
        speedrun.geometric_interval([1.0])
    with pytest.raises(ValueError, match="positive finite numbers, got \\[1.0, 0.0\\]"):
        speedrun.geometric_interval([1.0, 0.0])
    with pytest.raises(ValueError, match="confidence must be between 0 and 1, got 95"):
        speedrun.geometric_interval([1.0, 2.0], confidence=95)


# ------------------------------------------------------------------ the run

def test_the_corpus_is_ascii_codes_split_nine_to_one(corpus):
    assert len(corpus.train) + len(corpus.validation) == 20_000
    assert len(corpus.train) == 18_000 and int(corpus.train.max()) < speedrun.VOCABULARY
    with pytest.raises(ValueError, match="load_corpus: max_chars must be a positive whole"):
        speedrun.load_corpus(max_chars=0)


def test_count_models_score_what_counting_can_know():
    # "ab" repeated: letters are half and half (ln 2), and the letter before decides the next
    text = torch.tensor([97, 98] * 20_000)  # long enough that the half-counts hardly matter
    letters, pairs = speedrun.count_model_losses(speedrun.Corpus(text, text[:100], ()))
    assert letters == pytest.approx(np.log(2), abs=0.01)
    assert pairs < 0.01


def test_the_target_asks_for_more_than_letter_counts(corpus):
    letters, pairs = speedrun.count_model_losses(speedrun.load_corpus())
    assert 2.5 < pairs < letters < np.log(128)  # the lesson's target, 2.5, is below both


def test_the_cpu_rows_are_cumulative_and_name_what_they_skip():
    rows = speedrun.cumulative_changes("cpu")
    recipes = [r for r in rows if isinstance(r, speedrun.Recipe)]
    skipped = {r.name: r.reason for r in rows if isinstance(r, speedrun.Skipped)}
    assert not recipes[0].data_on_device and recipes[-1].data_on_device and recipes[-1].sdpa
    assert recipes[-1].batch_size == 4 * recipes[0].batch_size
    assert "compile_on_cpu=True" in skipped["+ torch.compile"]
    assert "CUDA GPU" in skipped["+ CUDA graphs"]


def test_sdpa_and_attention_by_hand_agree():
    torch.manual_seed(0)
    by_hand = speedrun.CharTransformer()
    fused = speedrun.CharTransformer(sdpa=True)
    fused.load_state_dict(by_hand.state_dict())
    codes = torch.randint(0, speedrun.VOCABULARY, (2, speedrun.CONTEXT))
    torch.testing.assert_close(by_hand(codes), fused(codes), atol=1e-5, rtol=1e-4)


def test_measure_interleaves_the_rows_and_restores_the_threads(corpus):
    rows = [r for r in speedrun.cumulative_changes("cpu") if isinstance(r, speedrun.Recipe)][:2]
    order, threads = [], torch.get_num_threads()
    records = speedrun.measure(rows, corpus, target=100.0, repeats=2, device="cpu",
                               eval_every=1, threads=1, progress=order.append)
    assert [(r.recipe, r.seed) for r in order] == [(rows[0].name, 0), (rows[1].name, 0),
                                                   (rows[0].name, 1), (rows[1].name, 1)]
    assert torch.get_num_threads() == threads
    run = records[rows[0].name][0]
    assert run.reached and run.steps == 1 and run.peak_bytes is None and run.tokens_per_s > 0
    table = speedrun.summary_table(records, {rows[1].name: "1.00x not shown"},
                                   [speedrun.Skipped("+ x", "08", "why")])
    assert "n/a" in table and "1.00x not shown" in table and "skipped: why" in table


def test_train_to_target_refuses_a_bad_target(corpus):
    baseline = speedrun.cumulative_changes("cpu")[0]
    with pytest.raises(ValueError, match="train_to_target: target must be a positive number"):
        speedrun.train_to_target(baseline, corpus, target=0, seed=0, device="cpu")


@pytest.mark.gpu
def test_every_gpu_row_trains_and_reads_its_peak(corpus):
    rows = [r for r in speedrun.cumulative_changes("cuda") if isinstance(r, speedrun.Recipe)]
    for row in rows:
        run = speedrun.train_to_target(row, corpus, target=100.0, seed=0, device="cuda",
                                       eval_every=2, max_steps=4)
        assert run.reached and run.peak_bytes and run.peak_bytes > 0, row.name
