"""The real adapter's edges: usb:// by VID:PID and USB serial, two adapters of one VID:PID told apart,
the FTDI latency timer checked when a serial bus opens, and `hil sim --serial` serving the virtual robot on a
serial port that the official DynamixelSDK opens. No USB hardware here: pyserial's port list, pyusb's devices and
sysfs are stand-ins (plain objects, a temp dir); the serial ports are real ptys."""
from __future__ import annotations

import os
import select
import subprocess
import threading
import tty
from types import SimpleNamespace

import pytest
from dynamixel_sdk import COMM_SUCCESS, PacketHandler, PortHandler
from dynamixel_sdk import port_handler

from hil.runtime.ports import format_adapters, list_adapters, usb_identity
from hil.runtime.transports import TransportError, open_transport
from hil.runtime.transports.base import PEER_PROCESS_LATENCY_S
from hil.runtime.transports.serial_port import check_latency_timer
from hil.runtime.transports.usb_port import resolve_usb_url
from conftest import hil_command
from waiting import wait_for


def port(device, serial, location, vid=0x0403, pid=0x6014):
    return SimpleNamespace(device=device, description="USB <-> Serial", vid=vid, pid=pid, serial_number=serial,
                           manufacturer="FTDI", product="U2D2", location=location)


PORTS = [port("/dev/ttyUSB0", "FT12AB34", "1-1.2:1.0"), port("/dev/ttyUSB1", "FT99ZZ00", "1-1.3:1.0"),
         port("/dev/ttyACM0", "0001", "2-1:1.0", vid=0x2341, pid=0x0043)]


def test_usb_url_finds_the_adapter_by_serial_and_by_vid_pid():
    lister = lambda: PORTS  # noqa: E731
    assert resolve_usb_url("usb://0403:6014?serial=FT99ZZ00", lister) == ("/dev/ttyUSB1", None)
    assert resolve_usb_url("usb://?serial=FT12AB34&baud=4000000", lister) == ("/dev/ttyUSB0", 4000000)
    assert resolve_usb_url("usb://2341:0043", lister) == ("/dev/ttyACM0", None)


def test_usb_url_that_matches_none_or_two_names_the_ports_there_are():
    lister = lambda: PORTS  # noqa: E731
    with pytest.raises(TransportError) as none:
        resolve_usb_url("usb://?serial=NOPE", lister)
    assert "no serial adapter matches" in str(none.value) and "/dev/ttyUSB1 0403:6014 serial=FT99ZZ00" in str(none.value)
    with pytest.raises(TransportError) as two:
        resolve_usb_url("usb://0403:6014", lister)
    assert "2 adapters match" in str(two.value) and "?serial=" in str(two.value)
    with pytest.raises(TransportError, match="VID:PID"):
        open_transport("usb://zz:6014")


def test_two_adapters_of_one_vid_pid_are_shown_apart():
    devices = [SimpleNamespace(bus=1, address=9, bcdDevice=0x0600, port_numbers=(1, 3), serial_number="FT99ZZ00"),
               SimpleNamespace(bus=1, address=4, bcdDevice=0x0600, port_numbers=(1, 2), serial_number="FT12AB34")]
    finder = lambda vid, pid: devices  # noqa: E731
    adapters = list_adapters(lambda: PORTS[:2])
    text = format_adapters(adapters, identity=lambda *a: usb_identity(*a, finder=finder))
    lines = text.splitlines()
    assert "usb bus 1 address 4" in lines[1] and "usb bus 1 address 9" in lines[3], text
    by_serial = usb_identity(0x0403, 0x6014, None, "FT99ZZ00", finder=finder)
    assert by_serial["address"] == 9


def _timer(tmp_path, name, value):
    d = tmp_path / "bus" / "usb-serial" / "devices" / name
    d.mkdir(parents=True)
    (d / "latency_timer").write_text(f"{value}\n")
    return d / "latency_timer"


def test_opening_a_serial_bus_sets_the_latency_timer_or_warns_with_the_fix(tmp_path, monkeypatch):
    timer = _timer(tmp_path, "ttyUSB0", 16)
    with pytest.warns(RuntimeWarning, match="set to 1 ms"):
        notes = check_latency_timer("/dev/ttyUSB0", tmp_path)
    assert timer.read_text().strip() == "1" and "was 16 ms" in notes[0]
    locked = _timer(tmp_path, "ttyUSB1", 16)
    real_write = type(locked).write_text

    def sysfs_write(path, *args, **kwargs):  # sysfs: only root may write the timer (we may be root here)
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_write(path, *args, **kwargs)

    monkeypatch.setattr(type(locked), "write_text", sysfs_write)
    with pytest.warns(RuntimeWarning, match="Fix: echo 1 [|] sudo tee"):
        check_latency_timer("/dev/ttyUSB1", tmp_path)
    assert locked.read_text().strip() == "16"
    assert check_latency_timer("/dev/ttyUSB9", tmp_path) == []  # no such adapter: nothing to say


def _relay(a: int, b: int, stop: threading.Event) -> None:
    """Bytes between two pty masters: a null-modem cable between two serial ports."""
    while not stop.is_set():
        ready = select.select([a, b], [], [], 0.05)[0]
        for src in ready:
            try:
                data = os.read(src, 4096)
            except OSError:
                data = b""
            if data:
                os.write(b if src == a else a, data)


def test_hil_sim_serves_on_a_serial_port_that_the_sdk_opens(monkeypatch):
    ends = [os.openpty() for _ in range(2)]
    for master, slave in ends:
        tty.setraw(master)
        tty.setraw(slave)
    stop = threading.Event()
    relay = threading.Thread(target=_relay, args=(ends[0][0], ends[1][0], stop), daemon=True)
    relay.start()
    device_path, client_path = os.ttyname(ends[0][1]), os.ttyname(ends[1][1])
    proc = subprocess.Popen([*hil_command(), "sim", "servo_chain", "--serial", device_path, "--baud", "1000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline().decode().strip() == device_path
        monkeypatch.setattr(port_handler, "LATENCY_TIMER", 1000 * PEER_PROCESS_LATENCY_S / 2)
        sdk_port = PortHandler(client_path)
        assert sdk_port.openPort() and sdk_port.setBaudRate(1000000)
        try:
            ph = PacketHandler(2.0)
            model, result, error = wait_for(lambda: (r := ph.ping(sdk_port, 1))[1] == COMM_SUCCESS and r,
                                            what="an SDK ping answered over the serial port")
            assert model == 1020 and error == 0
        finally:
            sdk_port.closePort()
    finally:
        proc.terminate()
        proc.wait(10)
        stop.set()
        relay.join(2)
        for master, slave in ends:
            os.close(master)
            os.close(slave)
