"""``promote``: make a candidate the gates kept the live, validated, retained configuration.

Pipeline position: outside the sweep, beside :mod:`.rollback` (the port's lock, the journal, the restore's
launch and validation), and at a sweep's end with ``run.promote_keep`` (:func:`promote_after_sweep`,
called by :mod:`orchestrator.app.controller`): one path for both. A search's recommendation is an ordinary
candidate of its sweep (the winner's confirmation), promoted the same way.

The candidate must be KEEP in the sweep's ``verdicts.json`` (:func:`kept_candidate`; anything else is
refused, naming its verdict, before anything is touched). Its recorded ``spec.json`` is checked against
the fingerprint its launch recorded, copied byte-for-byte into ``promotions/<stamp>/``, and its typed
candidate (recorded beside the spec, checked to render that fingerprint) is written as a candidate file
there (``conf/candidate/<name>.yaml``). Then, journalled first (``promotion_started``): the live service is
stopped (the spec binds the service's port, so the two cannot run side by side: stop, then start, as
rollback does), the spec is launched and validated under load exactly as the restore validates the
retained configuration (:func:`orchestrator.recovery.restore.validate_retained`), and on success
``promoted`` makes it the retained configuration: what ``rollback`` restores, ``status`` reports, the copy
beside the port's lock holds and the next sweep finds as the live service. A start or a validation that
fails (or Ctrl-C, or an error) journals ``promotion_failed`` and restores the previous retained
configuration, validated. A process killed in between leaves ``promotion_started`` without an end: the
retained configuration is still the previous one, which ``rollback`` restores.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from contracts.candidate_file import candidate_file_text, read_candidate
from contracts.errors import (
    EXIT_INCOMPLETE,
    GauntletError,
    PortInUseError,
    PromotionError,
    PromotionRefused,
    ResultFileError,
    RollbackError,
    SweepLockedError,
    exit_code_for,
    sweep_dir_error,
)
from contracts.files import read_model, write_model
from contracts.layout import PROMOTIONS_DIR, PromotionPaths, SweepPaths, hydra_job_configs, promotion_dir
from contracts.results import CandidateRun, RecoveryValidation
from contracts.schema import CandidateConfig
from contracts.verdicts import Verdict, decision_label, read_verdicts, spelled_reason
from launch.spec import LaunchSpec
from orchestrator.ledger import offsite
from orchestrator.ledger.events import Promoted, PromotionFailed, PromotionStarted, ValidationFailed
from orchestrator.ledger.lock import SweepLock
from orchestrator.measure.launch import RunLabels, measured_launch
from orchestrator.recovery.handover import port_refusal
from orchestrator.recovery.interrupted import interrupted_lines, sigterm_interrupts
from orchestrator.recovery.locate import live_elsewhere, load_for_acting, resolve_sweep_dir
from orchestrator.recovery.restore import read_retained_spec, restore, validate_retained
from orchestrator.recovery.rollback import answer_for_the_service
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import runs_now, stop_leftovers
from orchestrator.servers.seams import Seams

USAGE = f"""usage: python -m orchestrator promote SWEEP_DIR NAME

Make NAME, a candidate the sweep's gates kept (KEEP in verdicts.json), the live service: its recorded
spec is launched byte-for-byte (fingerprint-checked), validated under load as a restore is, and made the
retained configuration that `rollback`, `status` and the next sweep use. The live service is stopped
first (both would serve the service's port); a start or validation that fails restores the previous
retained configuration, validated (exit 7). Evidence and the candidate as a file (the next sweep's
baseline) in the sweep's {PROMOTIONS_DIR}/<stamp>/. A candidate that is not KEEP is refused (exit 2).
"""

#: A promotion's launch record (not read by the judge: it lives in ``promotions/<stamp>/launch/``).
PROMOTION = RunLabels(is_baseline=False, phase="recovery")


@dataclass(frozen=True)
class Kept:
    """A candidate the gates kept, as its sweep recorded it: the spec (fingerprint-checked), its file,
    the typed candidate that renders it, the verdict's reason and its measured start (the downtime)."""

    name: str
    spec: LaunchSpec
    spec_file: Path
    candidate: CandidateConfig
    reason: str
    ready_s: float | None


@dataclass(frozen=True)
class Promotion:
    """How a promotion ended: the candidate's validation, and (when it failed) the previous retained
    configuration's, restored."""

    name: str
    folder: PromotionPaths
    validation: RecoveryValidation
    restored: RecoveryValidation | None = None

    @property
    def ok(self) -> bool:
        return self.validation.ok

    @property
    def candidate_file(self) -> Path:
        return self.folder.candidate_file(self.name)

    def failure(self, report: str | None = None) -> PromotionError:
        """A failed promotion as the error the command exits with (what failed, what runs now; ``report``:
        what was done about the sweep's report)."""
        back = self.restored
        if back is None:
            now = "nothing was restored"
        elif back.ok:
            now = f"the previous retained configuration {back.candidate} is live again, validated "
            now += f"(pid {back.pid})"
        else:
            now = f"restoring the previous retained configuration {back.candidate} FAILED too: "
            now += back.reason
        return PromotionError(
            f"the promotion of {self.name} failed: {self.validation.reason}; {now}",
            hint=f"evidence in {self.folder.root}; `python -m orchestrator status` says what runs"
            + ("" if back is not None and back.ok else ", `python -m orchestrator rollback` restores")
            + (f"; {report}" if report else ""),
        )


def kept_candidate(ctx: SweepContext, name: str) -> Kept:
    """``name`` as the sweep kept it, or :class:`PromotionRefused` naming its verdict (nothing touched)."""
    try:
        verdicts = read_verdicts(ctx.dir)
    except ResultFileError as exc:
        raise PromotionRefused(
            f"{ctx.dir} has no readable verdicts ({exc.message}): only a candidate the gates kept is "
            "promoted",
            hint=f"judge the sweep first: `python -m orchestrator judge {ctx.dir}`",
        ) from exc
    verdict = next((v for v in verdicts.verdicts if v.candidate == name), None)
    if verdict is None or name == verdicts.baseline:
        judged = ", ".join(v.candidate for v in verdicts.verdicts) or "none"
        what = "the sweep's baseline" if name == verdicts.baseline else "not a candidate of this sweep"
        raise PromotionRefused(
            f"{name} is {what}: only a candidate the gates kept is promoted (judged here: {judged})",
            hint=_keeps_hint(ctx.dir, verdicts.verdicts),
        )
    if verdict.decision != "keep":
        raise PromotionRefused(
            f"refusing to promote {name}: its verdict is {decision_label(verdict.decision)}, not KEEP "
            f"({spelled_reason(verdict.decision, verdict.reason)}); nothing was stopped or started",
            hint=_not_kept_hint(ctx, verdict, verdicts.verdicts),
        )
    paths = ctx.paths.candidate(name)
    run = read_model(paths.run_file, CandidateRun)
    spec = read_retained_spec(paths.spec, run.fingerprint, None, act="promote")
    return Kept(
        name=name,
        spec=spec,
        spec_file=paths.spec,
        candidate=recorded_candidate(ctx, name, spec),
        reason=verdict.reason,
        ready_s=run.startup.time_to_ready_s,
    )


def _keeps_hint(sweep_dir: Path, verdicts: list[Verdict]) -> str:
    keeps = [v.candidate for v in verdicts if v.decision == "keep"]
    if not keeps:
        return "no candidate of this sweep is KEEP: the baseline stays the retained configuration"
    return f"KEEP here: {', '.join(keeps)} (`python -m orchestrator promote {sweep_dir} {keeps[0]}`)"


def _not_kept_hint(ctx: SweepContext, verdict: Verdict, verdicts: list[Verdict]) -> str:
    if verdict.decision == "incomplete" and verdict.resume:
        return f"its evidence is partial: complete the sweep first ({verdict.resume}), then promote a KEEP"
    base = (
        f"only a KEEP is promoted; to serve {verdict.candidate} anyway, make it the baseline of a sweep "
        f"(`candidate@baseline={verdict.candidate}` after `python -m orchestrator stop {ctx.dir}`), which "
        "restores it at its end"
    )
    others = [v.candidate for v in verdicts if v.decision == "keep"]
    return f"{base}; KEEP here: {', '.join(others)}" if others else base


def recorded_candidate(ctx: SweepContext, name: str, spec: LaunchSpec) -> CandidateConfig:
    """The typed candidate that rendered ``spec``: the record beside its launch (``candidate.yaml``), else
    Hydra's record of the jobs that measured it (a sweep of an earlier gauntlet), newest first; each must
    render the measured fingerprint with the sweep's service and host."""
    sources: list[tuple[Path, str | None]] = [(ctx.paths.candidate(name).candidate_config, None)]
    sources += [(path, "candidate") for path in reversed(hydra_job_configs(ctx.dir, name))]
    tried: list[str] = []
    for path, node in sources:
        if not path.exists():
            continue
        try:
            candidate = read_candidate(path, node=node)
            rendered = ctx.render(candidate).fingerprint
        except GauntletError as exc:
            tried.append(f"{path}: {exc.message}")
            continue
        if candidate.name == name and rendered == spec.fingerprint:
            return candidate
        tried.append(f"{path}: renders {rendered}, not the measured {spec.fingerprint}")
    raise ResultFileError(
        f"no recorded configuration of {name} renders its measured spec {spec.fingerprint}: the "
        "promoted candidate's file (the next sweep's baseline) cannot be written; nothing was stopped or "
        "started",
        evidence=tried or [f"neither {sources[0][0]} nor a Hydra job record of {name} is there"],
        hint="re-run the sweep with this version of gauntlet (it records each candidate it measures)",
    )


def new_promotion(sweep_dir: Path, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> PromotionPaths:
    """``promotions/<stamp>/`` for this promotion: a new folder, never one an earlier promotion wrote."""
    stamp = now().strftime("%Y%m%dT%H%M%SZ")
    target, n = promotion_dir(sweep_dir, stamp), 1
    while target.exists():
        n += 1
        target = promotion_dir(sweep_dir, f"{stamp}-{n}")
    return PromotionPaths(target)


def promote_here(ctx: SweepContext, kept: Kept, folder: PromotionPaths) -> Promotion:
    """The promotion itself, by whoever holds the port (``promote`` under its lock, the sweep at its end):
    copy, journal, stop the live service, launch and validate; on success the candidate is the retained
    configuration; otherwise the previous one is restored (:class:`Promotion` says which)."""
    state = ctx.journal.replay()
    if state.retained_fingerprint is None:
        raise RollbackError(
            f"{ctx.journal.path}: no retained configuration was recorded",
            hint="nothing to promote over: this sweep never started",
        )
    folder.root.mkdir(parents=True)
    shutil.copyfile(kept.spec_file, folder.spec)  # byte-for-byte, then checked again as launched
    config = kept.spec_file.with_name(folder.vllm_config.name)
    if config.exists():
        shutil.copyfile(config, folder.vllm_config)
    spec = read_retained_spec(folder.spec, kept.spec.fingerprint, None, act="promote")
    candidate_file = folder.candidate_file(kept.name)
    candidate_file.parent.mkdir(parents=True)
    candidate_file.write_text(candidate_file_text(kept.candidate, _header(ctx, kept, folder)))
    ctx.journal.append(
        PromotionStarted(
            candidate=kept.name,
            fingerprint=spec.fingerprint,
            spec_file=str(folder.spec),
            candidate_file=str(candidate_file),
            previous=state.retained_fingerprint,
            previous_candidate=state.retained_candidate,
        )
    )
    ctx.say(
        f"promoting {kept.name} ({spec.fingerprint}; its verdict: {kept.reason}); evidence in {folder.root}"
    )
    try:
        validation = _launch_and_validate(ctx, kept, spec, folder)
    except (KeyboardInterrupt, Exception) as exc:  # Ctrl-C, a full disk, a bug: the previous one back
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        _failed(ctx, kept, spec, why)
        ctx.say(
            f"the promotion of {kept.name} stopped ({why}): restoring the previous retained configuration"
        )
        restore(ctx, reason=f"the promotion of {kept.name} stopped ({why})", out=folder.restored.root)
        raise
    if not validation.ok:
        _failed(ctx, kept, spec, validation.reason)
        back = restore(ctx, reason=f"the promotion of {kept.name} failed", out=folder.restored.root)
        return Promotion(kept.name, folder, validation, back)
    assert validation.pid is not None
    ctx.journal.append(
        Promoted(
            candidate=kept.name,
            pid=validation.pid,
            fingerprint=spec.fingerprint,
            spec_file=str(folder.spec),
            candidate_file=str(candidate_file),
        )
    )
    try:  # the copy beside the port's lock holds the promoted spec from now on
        offsite.keep_offsite(ctx.journal, ctx.dir, ctx.cfg.service.port)
    except OSError as exc:
        ctx.say(f"could not keep a copy of the retained configuration beside the port's lock: {exc}")
    return Promotion(kept.name, folder, validation)


def _failed(ctx: SweepContext, kept: Kept, spec: LaunchSpec, reason: str) -> None:
    ctx.journal.append(PromotionFailed(candidate=kept.name, fingerprint=spec.fingerprint, reason=reason))


def _header(ctx: SweepContext, kept: Kept, folder: PromotionPaths) -> list[str]:
    return [
        f"{kept.name}, promoted from {ctx.dir.resolve()} (KEEP): the live service's configuration.",
        f"With that sweep's service and host it renders {kept.spec.fingerprint}.",
        f"Select it as the next sweep's baseline: -cd {folder.conf.resolve()} candidate@baseline={kept.name}",
    ]


def _launch_and_validate(
    ctx: SweepContext, kept: Kept, spec: LaunchSpec, folder: PromotionPaths
) -> RecoveryValidation:
    """Stop the live service, launch the copied spec, validate it as the restore validates (kept running
    only when the validation passed)."""
    port = ctx.cfg.service.port
    downtime = "its start"
    if kept.ready_s is not None:
        downtime = f"its start ({kept.ready_s:.1f} s in its sweep)"
    stop_leftovers(
        ctx.servers,
        ctx.journal.replay(),
        reason=f"promoting {kept.name}: both would serve port {port}, so the live service stops first and "
        f"the service is down for {downtime}",
    )
    out = folder.launch.root
    with measured_launch(
        ctx, spec, out, role="retained", labels=PROMOTION, discard_as=None, spec_file=folder.spec
    ) as launch:
        if not launch.ready:
            launch.write()
            startup = launch.run.startup
            result = RecoveryValidation(
                ok=False,
                candidate=kept.name,
                fingerprint=spec.fingerprint,
                recorded_fingerprint=kept.spec.fingerprint,
                pid=None,
                reason=f"{kept.name} did not start ({startup.kind}): {startup.matched_line or '-'}",
            )
            write_model(folder.launch.validation, result)
            ctx.journal.append(ValidationFailed(candidate=kept.name, reason=result.reason))
            return result
        promoted = replace(ctx, cfg=replace(ctx.cfg, baseline=kept.candidate))
        result = validate_retained(promoted, launch, kept.spec.fingerprint, promoted=True)
        if result.ok:
            launch.session.keep()  # the live service from now on
        return result


# ---------------------------------------------------------------- the command


@contextmanager
def holding_port(sweep_dir: Path, port: int) -> Iterator[SweepLock]:
    """The port's lock for ``promote`` (one owner of the service at a time, as ``rollback``); a running sweep
    of ``sweep_dir`` (its verdicts not final) or anyone else holding the port is refused, naming it."""
    lock = SweepLock.for_port(port)
    holder = lock.try_acquire(sweep_dir, role="promote")
    if holder is not None:
        if holder.owns(sweep_dir) and holder.role == "sweep":
            raise SweepLockedError(
                f"the sweep of {sweep_dir} is still running (pid {holder.pid or '?'}): its verdicts are not "
                "final, and nothing was stopped or started",
                holder=holder.sweep_dir,
                hint="promote once it has ended (its last lines name what it recommends); "
                "run.promote_keep=true makes a sweep promote its KEEP itself",
            )
        raise port_refusal(port, holder, sweep_dir, "promote")
    try:
        yield lock
    finally:
        lock.release()


def promote(sweep_dir: Path, name: str, seams: Seams, *, out: TextIO = sys.stdout) -> int:
    """``python -m orchestrator promote SWEEP_DIR NAME``; the exit code (0: promoted, or already retained)."""
    cfg = load_for_acting(sweep_dir, seams)
    with holding_port(sweep_dir, cfg.service.port):
        ctx = SweepContext.open(cfg, sweep_dir, seams)
        offsite.attach(ctx.journal, sweep_dir)
        kept = kept_candidate(ctx, name)
        state = ctx.journal.replay()
        if state.retained_fingerprint == kept.spec.fingerprint:
            out.write(
                f"promote: {name} is already the retained configuration of {sweep_dir} "
                f"({kept.spec.fingerprint}); nothing to do (`python -m orchestrator rollback {sweep_dir}` "
                "validates it)\n"
            )
            return 0
        runs = runs_now(ctx.servers)
        if not state.pending and not any(runs(s) for s in state.live.values()):
            live = live_elsewhere(sweep_dir, seams, cfg.service.port)
            if live is not None:  # refused before this sweep's journal is touched
                raise PortInUseError(
                    f"service port {cfg.service.port} is held by gauntlet's live service, "
                    f"{live.describe()}; nothing of {sweep_dir} runs, and nothing was stopped or started",
                    hint=f"stop it first with `python -m orchestrator stop {live.sweep}`, then promote again "
                    f"(nothing serves until {name} is ready)",
                )
        try:
            promotion = promote_here(ctx, kept, new_promotion(sweep_dir))
        finally:  # the sweep's report says what the promotion left live (Ctrl-C included)
            report = rerender_report(sweep_dir)
    if not promotion.ok:
        raise promotion.failure(report)
    answer_for_the_service(sweep_dir, cfg.service.port, seams)  # `latest` and the copy name this sweep
    result = promotion.validation
    out.write(
        f"promote OK: {name} {result.fingerprint} pid {result.pid} is the live service, validated under "
        f"load, and the retained configuration of {sweep_dir}\n  {result.reason}\n"
        f"  `python -m orchestrator rollback {sweep_dir}` restores it and `status` reports it; the next "
        f"sweep's baseline: -cd {promotion.folder.conf} candidate@baseline={name} "
        f"({promotion.candidate_file})\n  {report}\n"
    )
    return 0


def rerender_report(sweep_dir: Path) -> str:
    """Render the sweep's report again from its records, so that report.md and report.html say what the
    promotion left live (:mod:`report.live`); what was done, in words (a failure is said, not raised: the
    promotion's outcome stands either way)."""
    from report import write_report  # noqa: PLC0415  (the report's plots load only when one is rendered)

    paths = SweepPaths(sweep_dir)
    try:
        write_report(sweep_dir)
    except (GauntletError, OSError) as exc:
        again = f"`python -m orchestrator report {sweep_dir}`"
        return f"the sweep's report was not rendered again ({exc}): {again}"
    return f"the sweep's report says so: {paths.report_md}, {paths.report_html}"


def promote_after_sweep(
    ctx: SweepContext, validation: RecoveryValidation, code: int
) -> tuple[RecoveryValidation, int]:
    """``run.promote_keep``: at the end of a sweep whose restore validated and whose verdicts are complete,
    promote the candidate the gates recommend (the same path as the command). Returns the validation of
    what is live now and the sweep's exit code (a failed promotion's, 7, when it failed)."""
    try:
        verdicts = read_verdicts(ctx.dir)
    except ResultFileError:
        return validation, code  # the judge said why already
    name = verdicts.retained
    if name == verdicts.baseline:
        ctx.say("run.promote_keep: no candidate is KEEP; the baseline stays the retained configuration")
        return validation, code
    if code != 0 or not validation.ok:
        why = (
            "the sweep is INCOMPLETE (a resume may change its verdicts)"
            if code == EXIT_INCOMPLETE
            else "the sweep did not end cleanly"
        )
        ctx.say(f"run.promote_keep: {name} is KEEP but not promoted: {why}")
        return validation, code
    try:
        promotion = promote_here(ctx, kept_candidate(ctx, name), new_promotion(ctx.dir))
    except GauntletError as exc:
        ctx.say(f"run.promote_keep: {name} not promoted: {exc}")
        return validation, exc.exit_code
    except OSError as exc:  # the sweep directory refused the promotion's files (the previous one restored)
        disk = sweep_dir_error(exc, ctx.dir)
        if disk is None:
            raise
        ctx.say(f"run.promote_keep: {name} not promoted: {disk}")
        return validation, disk.exit_code
    if not promotion.ok:
        error = promotion.failure()
        ctx.say(str(error))
        return promotion.restored or validation, error.exit_code
    ctx.say(f"run.promote_keep: {name} promoted: the live service, validated, and the retained configuration")
    return promotion.validation, code


def main_promote(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    if len(args) != 2 or any(a.startswith("-") or "=" in a for a in args):
        print(f"gauntlet promote: expected SWEEP_DIR NAME, got {' '.join(args) or 'nothing'}\n\n{USAGE}",
              file=sys.stderr)  # fmt: skip
        return PromotionRefused.exit_code
    sweep_dir: Path | None = None
    try:
        seams = seams_factory()
        sweep_dir = resolve_sweep_dir(args[0])
        with sigterm_interrupts():  # SIGTERM unwinds as Ctrl-C does (the previous one restored), then said
            return promote(sweep_dir, args[1], seams)
    except GauntletError as exc:
        print(f"gauntlet promote: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if sweep_dir is not None:
            print("\n".join(interrupted_lines("promote", sweep_dir, seams, exc)), file=sys.stderr)
        return exit_code_for(exc)
