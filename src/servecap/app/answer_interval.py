"""The 80% intervals on an answer, with or without a calibration file (one place for plan,
capacity and simulate).

Without a calibration the corpus's errors give them (:func:`servecap.validation.interval.interval`,
the point bias-corrected from the same residuals). With one, the model was fitted to the user's
own server and the corpus's errors (made with the default efficiencies) no longer describe it:
the interval comes from the fit's own step-time RMSE
(:func:`servecap.validation.interval.calibrated_interval`), or there is none when the file
carries no fit (a hand-written file), and the note says so.
"""

from __future__ import annotations

from pathlib import Path

from servecap.validation.interval import MIN_VALUES, Interval, calibrated_interval, intervals_for


def answer_intervals(
    values: dict[str, tuple[float, str]],
    *,
    engine: str,
    gpu_family: str,
    calibration: Path | None,
    step_s: float,
    fallback_share: float = 0.0,
    model_class: str | None = None,
    engine_version: str | None = None,
    step_note: str | None = None,
) -> tuple[dict[str, Interval], str | None]:
    """The intervals of each named prediction ``name -> (value, metric)`` (values that are not
    positive get none) and a note when a calibration file leaves the answer without one.
    ``step_s`` is the decode step the answer runs at (the RMSE is read relative to it);
    ``step_note`` (the step model ``auto`` chose, and why) ends each interval's note."""
    if calibration is None:
        found = intervals_for(
            values,
            engine=engine,
            gpu_family=gpu_family,
            fallback_share=fallback_share,
            model_class=model_class,
            engine_version=engine_version,
        )
        if step_note:  # the step model ``auto`` chose and why: the residuals are that choice's
            from dataclasses import replace

            found = {k: replace(iv, note=f"{iv.note}; step times: {step_note}") for k, iv in found.items()}
        return found, None
    from servecap.calibration import load_calibration

    fit = load_calibration(calibration).fit
    if fit.rmse_s is None or fit.num_samples < MIN_VALUES or step_s <= 0:
        return {}, (
            f"no 80% interval: {calibration.name} carries no fit error (fit.rmse_s over at least {MIN_VALUES} "
            "samples, as `servecap calibrate` writes) and the corpus's errors do not apply to a fitted model"
        )
    rel = fit.rmse_s / step_s
    out = {
        name: calibrated_interval(v, metric=metric, relative_sd=rel, samples=fit.num_samples, source=calibration.name)
        for name, (v, metric) in values.items()
        if v > 0
    }
    return out, None
