"""The 17-servo bus cycle: one SyncWrite of goal positions + one Fast Sync Read of present positions.

Measured side by side in one run (no assertions; ratios are what matter, absolute numbers depend on the box):

  (a) our host (BusHost over a pty) against the official ROBOTIS client (dynamixel_sdk) on the same pty of the
      same device subprocess (``hil sim servo_chain --pty``, no timing emulation), alternating the two clients
      over a few rounds and opening/closing the port between rounds;
  (b) the device subprocess emulating wire time (``--baud``) at 1 Mbaud and at 4 Mbaud: our cycle rate against
      the wire-time limit of the bytes one cycle exchanges, and the SDK at 1 Mbaud for comparison;
  (c) for reference, the in-process ``sim://`` transport (no pty, no second process).

Every part's return delay time (register 9) is set to 0 before timing, torque is on, so the parts integrate
their dynamics on every access as they do in ``hil demo``.

    .venv/bin/python -m bench.bus_cycle [--seconds 2] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devices.control_table import XM430_W350
from devices.protocol import encode_fast_reply, encode_request
from devices.protocol import requests as rq
from firmware_sim.timing import wire_time_s
from runtime.bus import BusHost
from runtime.transports import open_transport

IDS = tuple(range(1, 18))
GOAL = XM430_W350["goal_position"]
PRESENT = XM430_W350["present_position"]
TORQUE = XM430_W350["torque_enable"]
RETURN_DELAY = XM430_W350["return_delay_time"]
CENTER = 2048
# Goals alternate between a few precomputed sets, so both clients encode fresh data every cycle.
GOAL_SETS = [{i: CENTER + ((k * 37 + i * 11) % 200) - 100 for i in IDS} for k in range(8)]
WARMUP_CYCLES = 20


# --- the device subprocess -------------------------------------------------------------------------------------
class Device:
    """``hil sim servo_chain --pty [--baud N]`` as a subprocess; the pty path is its first stdout line."""

    def __init__(self, baud: int | None = None):
        hil = Path(sys.executable).with_name("hil")
        cmd = [str(hil)] if hil.exists() else [sys.executable, "-m", "runtime.cli"]
        cmd += ["sim", "servo_chain", "--pty"]
        if baud:
            cmd += ["--baud", str(baud)]
        self.baud = baud
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.path = self.proc.stdout.readline().strip()
        if not self.path:
            self.proc.kill()
            raise RuntimeError(f"{' '.join(cmd)} printed no pty path")

    def prepare(self) -> None:
        """Return delay 0 (the usual setting for fast loops) and torque on, on every servo."""
        with BusHost(open_transport(self.path)) as bus:
            for i in IDS:
                bus.write(i, RETURN_DELAY.address, b"\x00")
            bus.sync_write_register(TORQUE, {i: 1 for i in IDS})
            bus.sync_write_register(GOAL, GOAL_SETS[0])

    def cpu_s(self) -> float:
        """CPU time the device process has used so far (user + system), from /proc."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the two clients ---------------------------------------------------------------------------------------------
class OurClient:
    name = "ours"

    def __init__(self, url: str):
        self.bus = BusHost(open_transport(url))

    def cycle(self, k: int) -> dict[int, int]:
        self.bus.sync_write_register(GOAL, GOAL_SETS[k & 7])
        return self.bus.sync_read_register(PRESENT, IDS, fast=True)

    def close(self) -> None:
        self.bus.close()


class SdkClient:
    """The official client, used the way its examples do: GroupSyncWrite + GroupSyncRead.fastSyncRead()."""

    name = "SDK"

    def __init__(self, path: str):
        import dynamixel_sdk as sdk

        self.sdk = sdk
        self.port = sdk.PortHandler(path)
        self.ph = sdk.PacketHandler(2.0)
        if not self.port.openPort() or not self.port.setBaudRate(1_000_000):
            raise RuntimeError(f"dynamixel_sdk cannot open {path}")
        self.writer = sdk.GroupSyncWrite(self.port, self.ph, GOAL.address, GOAL.size)
        self.reader = sdk.GroupSyncRead(self.port, self.ph, PRESENT.address, PRESENT.size)
        self.params = [{i: list(GOAL.encode(v)) for i, v in goals.items()} for goals in GOAL_SETS]
        for i in IDS:
            self.writer.addParam(i, self.params[0][i])
            self.reader.addParam(i)

    def cycle(self, k: int) -> dict[int, int]:
        sdk, writer, reader = self.sdk, self.writer, self.reader
        for i, data in self.params[k & 7].items():
            writer.changeParam(i, data)
        result = writer.txPacket()
        if result != sdk.COMM_SUCCESS:
            raise RuntimeError(f"SDK sync write: {self.ph.getTxRxResult(result)}")
        result = reader.fastSyncRead()
        if result != sdk.COMM_SUCCESS:
            raise RuntimeError(f"SDK fast sync read: {self.ph.getTxRxResult(result)}")
        return {i: reader.getData(i, PRESENT.address, PRESENT.size) for i in IDS}

    def close(self) -> None:
        self.port.closePort()


@dataclass
class Run:
    cycles: int = 0
    seconds: float = 0.0
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else float("nan")


def run_for(make_client, seconds: float, into: Run) -> Run:
    """Open a client, warm up, run cycles for ``seconds``, close; adds to ``into``."""
    client = make_client()
    try:
        for k in range(WARMUP_CYCLES):
            client.cycle(k)
        k = 0
        start = time.perf_counter()
        end = start + seconds
        while True:
            try:
                positions = client.cycle(k)
                if len(positions) != len(IDS):
                    into.errors += 1
            except Exception:  # noqa: BLE001 - a benchmark counts failures, it does not stop on them
                into.errors += 1
            k += 1
            now = time.perf_counter()
            if now >= end:
                break
        into.cycles += k
        into.seconds += now - start
    finally:
        client.close()
    return into


def alternate(clients: dict[str, callable], seconds: float, rounds: int) -> dict[str, Run]:
    """Run each client for ``seconds`` in total, split into ``rounds`` alternating slices (order flips each round)."""
    runs = {name: Run() for name in clients}
    order = list(clients)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            run_for(clients[name], seconds / rounds, runs[name])
    return runs


# --- the wire-time limit -----------------------------------------------------------------------------------------
def cycle_bytes() -> dict[str, int]:
    """Exact bytes on the wire for one cycle, from the encoders (stuffing included)."""
    write = encode_request(rq.SyncWrite(GOAL.address, GOAL.size,
                                        tuple((i, GOAL.encode(v)) for i, v in GOAL_SETS[0].items())))
    read = encode_request(rq.SyncRead(PRESENT.address, PRESENT.size, IDS, fast=True))
    reply = encode_fast_reply([(0, i, PRESENT.encode(CENTER)) for i in IDS])
    return {"sync_write": len(write), "fast_sync_read": len(read), "fast_reply": len(reply),
            "total": len(write) + len(read) + len(reply)}


def limit_rate(total_bytes: int, baud: int) -> float:
    return 1.0 / wire_time_s(total_bytes, baud)


# --- the benchmark -----------------------------------------------------------------------------------------------
def _row(label: str, run: Run, extra: str = "") -> str:
    errors = f"  ({run.errors} failed cycles)" if run.errors else ""
    return f"  {label:<44} {run.rate:9.0f} cycles/s  {1e6 / run.rate:8.0f} us/cycle  {extra}{errors}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.bus_cycle", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per client and setting (default 2)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating slices per comparison (default 4)")
    args = parser.parse_args(argv)
    seconds, rounds = args.seconds, args.rounds
    results: dict = {}

    sizes = cycle_bytes()
    print("bus cycle: 17 x XM430-W350, SyncWrite goal_position (116, 4 B) + FastSyncRead present_position (132, 4 B)")
    print(f"  bytes per cycle: SyncWrite {sizes['sync_write']} + FastSyncRead {sizes['fast_sync_read']} "
          f"+ fast reply {sizes['fast_reply']} = {sizes['total']} B")
    print(f"  {os.cpu_count()} CPU cores; client and device process share them; {seconds:g} s per client, "
          f"{rounds} alternating rounds")

    # (a) same pty, no timing emulation
    print("\n(a) pty, device subprocess without timing emulation: ours vs the official SDK")
    with Device() as dev:
        dev.prepare()
        cpu0, t0 = dev.cpu_s(), time.perf_counter()
        runs = alternate({"ours": lambda: OurClient(dev.path), "SDK": lambda: SdkClient(dev.path)}, seconds, rounds)
        dev_load = (dev.cpu_s() - cpu0) / (time.perf_counter() - t0)
    ratio = runs["ours"].rate / runs["SDK"].rate
    print(_row("ours  (BusHost over the pty)", runs["ours"]))
    print(_row("SDK   (PortHandler + GroupSync*)", runs["SDK"]))
    print(f"  ratio ours/SDK: {ratio:.2f}x   (target >= 2x)   device process CPU load {100 * dev_load:.0f}% of a core")
    results["pty"] = {"ours": runs["ours"].rate, "sdk": runs["SDK"].rate, "ratio": ratio}

    # (b) wire-time emulation
    print("\n(b) pty, device subprocess emulating wire time (return delay 0): against the wire-time limit")
    for baud, with_sdk in ((1_000_000, True), (4_000_000, False)):
        limit = limit_rate(sizes["total"], baud)
        with Device(baud) as dev:
            dev.prepare()
            clients = {"ours": lambda: OurClient(dev.path)}
            if with_sdk:
                clients["SDK"] = lambda: SdkClient(dev.path)
            runs = alternate(clients, seconds, rounds if with_sdk else 1)
        label = f"{baud / 1e6:g} Mbaud"
        print(f"  {label}: wire-time limit {limit:.0f} cycles/s ({1e6 / limit:.0f} us/cycle)")
        print(_row(f"ours  @ {label}", runs["ours"], f"{100 * runs['ours'].rate / limit:5.1f}% of limit"))
        entry = {"ours": runs["ours"].rate, "limit": limit, "ours_pct": 100 * runs["ours"].rate / limit}
        if with_sdk:
            print(_row(f"SDK   @ {label}", runs["SDK"], f"{100 * runs['SDK'].rate / limit:5.1f}% of limit"))
            entry["sdk"] = runs["SDK"].rate
            entry["sdk_pct"] = 100 * runs["SDK"].rate / limit
            print(f"  ratio ours/SDK @ {label}: {runs['ours'].rate / runs['SDK'].rate:.2f}x")
        results[baud] = entry
    print("  (target: ours >= 80% of the limit at 1 Mbaud)")

    # (c) in-process reference
    print("\n(c) in-process sim:// (no pty, no second process), for reference")
    for url in ("sim://servo_chain", "sim://servo_chain?baud=1000000"):
        def make(url=url):
            client = OurClient(url)
            for i in IDS:
                client.bus.write(i, RETURN_DELAY.address, b"\x00")
            client.bus.sync_write_register(TORQUE, {i: 1 for i in IDS})
            return client
        run = run_for(make, seconds / 2, Run())
        extra = ""
        if "baud" in url:
            extra = f"{100 * run.rate / limit_rate(sizes['total'], 1_000_000):5.1f}% of limit"
        print(_row(f"ours  {url}", run, extra))
        results[url] = run.rate
    return results


if __name__ == "__main__":
    main()
