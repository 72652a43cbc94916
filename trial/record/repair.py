"""``hil log repair DIR``: a trial log cut short by a crash, rewritten complete and indexed.

A trial killed mid-run leaves trial.mcap without its summary and footer. Our reader (log.py) walks such a file
record by record, but other MCAP tools (the ``mcap`` library's ``make_reader``, Foxglove, the ``mcap`` CLI) start
from the footer: they read garbage there and give up (RecordLengthLimitExceeded, 0 messages). The repair walks
the records that are all there, with the same walk as our reader, and writes them again with the ``mcap``
package's own Writer: the header, every schema, channel, message (same times, sequence numbers and bytes),
metadata and attachment, in file order, then chunk indexes, statistics, the summary and the footer. So the
repaired file holds exactly the messages our reader read, and every MCAP tool opens it.

The repaired file also carries a metadata record ``hil.repair`` (what was cut, where, how many messages were
kept), so a report of a repaired log still says the trial was cut short. The original is kept next to it as
``trial.mcap.broken`` (or left alone when the copy goes elsewhere, ``--out``); the new file is written beside
the old one and moved into place, so there is never a moment without a log.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mcap.records import Attachment, Channel, Header, Message, Metadata, Schema
from mcap.writer import CompressionType, Writer

from .log import REPAIR_METADATA, walk_records
from .recorder import LOG_NAME

BROKEN_SUFFIX = ".broken"


class RepairError(ValueError):
    """The log cannot be repaired (not an MCAP file, nothing to keep, a file in the way); says which and why."""


@dataclass(frozen=True)
class RepairResult:
    source: Path  # the log that was read (after an in-place repair: the kept original, *.broken)
    written: Path | None  # the complete log written (None: the log was complete, nothing was done)
    messages: int
    channels: int
    end_s: float  # the time of the last message kept
    stopped: str | None  # where and why the original was cut short (None: it was complete)

    def text(self) -> str:
        """What was done, in one sentence for the user."""
        if self.written is None:
            return f"{self.source}: the log is complete ({self.messages} messages); nothing to repair"
        return (f"repaired {self.written}: {self.messages} messages on {self.channels} channels up to "
                f"t={self.end_s:g} s, complete and indexed (the original was cut short: {self.stopped}; it is "
                f"kept as {self.source})")


def repair_log(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> RepairResult:
    """Repair the log at ``path``: into ``out`` (the original untouched), or in place (the original renamed to
    ``path + .broken``). A complete log is left as it is (``written`` None)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RepairError(f"{path}: cannot read the log: {exc.strerror}") from None
    walk = walk_records(data, str(path))  # ValueError when it is not MCAP at all
    messages = [r for r in walk.records if isinstance(r, Message)]
    channels = [r for r in walk.records if isinstance(r, Channel)]
    end_s = max((m.log_time for m in messages), default=0) / 1e9
    if walk.complete and out is None:
        return RepairResult(path, None, len(messages), len(channels), end_s, None)
    if not any(isinstance(r, Header) for r in walk.records):
        raise RepairError(f"{path}: nothing to repair: the file holds no complete record ({walk.stopped})")
    target = Path(out) if out is not None else path
    broken = path.with_name(path.name + BROKEN_SUFFIX)
    if out is None and broken.exists():
        raise RepairError(f"{path}: {broken} is already there (an earlier repair's original); move it away first")
    partial = target.with_name(target.name + ".repairing")
    stopped = walk.stopped or "complete"
    try:
        with open(partial, "wb") as f:
            _write(f, walk.records, {"original": path.name, "stopped": stopped, "messages": str(len(messages)),
                                     "end_s": f"{end_s:g}"})
    except OSError as exc:
        partial.unlink(missing_ok=True)  # nothing half-done stays behind
        raise RepairError(_no_room(path, target, exc, len(data))) from None
    except BaseException:
        partial.unlink(missing_ok=True)  # nothing half-done stays behind
        raise
    if out is None:  # keep the original under its new name, then put the repaired copy in its place
        try:
            os.link(path, broken)
        except OSError:
            os.replace(path, broken)
        os.replace(partial, path)
        source = broken
    else:
        os.replace(partial, target)
        source = path
    return RepairResult(source, target, len(messages), len(channels), end_s, stopped)


def _no_room(path: Path, target: Path, exc: OSError, size: int) -> str:
    """Why the repaired copy could not be written, and where to write it instead."""
    from .logfile import describe_full

    return (f"{path}: cannot write the repaired copy {target}: {describe_full(target, exc)} ({exc.strerror}); "
            f"it needs about {size:,} bytes: free that much there, or write it to another disk with "
            f"`hil log repair {path} --out OTHER_DISK/trial.mcap` (the log itself is unchanged)")


def _write(f, records: list, repair_note: dict[str, str]) -> None:
    """Every record again, through the mcap Writer (ids renumbered as the Writer gives them, mapped through)."""
    header = next(r for r in records if isinstance(r, Header))
    writer = Writer(f, compression=CompressionType.ZSTD)
    writer.start(profile=header.profile, library=header.library)
    schema_ids: dict[int, int] = {0: 0}  # schema 0: a channel without a schema
    channel_ids: dict[int, int] = {}
    for record in records:
        if isinstance(record, Schema) and record.id not in schema_ids:
            schema_ids[record.id] = writer.register_schema(record.name, record.encoding, record.data)
        elif isinstance(record, Channel) and record.id not in channel_ids:
            channel_ids[record.id] = writer.register_channel(record.topic, record.message_encoding,
                                                             schema_ids.get(record.schema_id, 0), record.metadata)
        elif isinstance(record, Message) and record.channel_id in channel_ids:
            writer.add_message(channel_ids[record.channel_id], record.log_time, record.data, record.publish_time,
                               record.sequence)
        elif isinstance(record, Metadata) and record.name != REPAIR_METADATA:
            writer.add_metadata(record.name, record.metadata)
        elif isinstance(record, Attachment):
            writer.add_attachment(record.create_time, record.log_time, record.name, record.media_type, record.data)
    writer.add_metadata(REPAIR_METADATA, repair_note)
    writer.finish()


# --- hil log repair ---------------------------------------------------------------------------------------------
def log_path(where: str | os.PathLike[str]) -> Path:
    """A trial folder (its trial.mcap) or the log file itself."""
    where = Path(where)
    return where / LOG_NAME if where.is_dir() else where


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="a trial folder (its trial.mcap) or an MCAP file")
    parser.add_argument("--out", metavar="FILE", help="write the repaired log here and leave the original as it "
                                                      "is (default: in place, the original kept as "
                                                      "trial.mcap.broken)")


def run(args: argparse.Namespace) -> int:
    path = log_path(args.dir)
    if not path.is_file():
        print(f"hil: error: {path}: no trial log there", file=sys.stderr)
        return 2
    try:
        result = repair_log(path, args.out)
    except ValueError as exc:  # RepairError, or not an MCAP file
        print(f"hil: error: {exc}", file=sys.stderr)
        return 2
    print(result.text())
    return 0
