"""`hil ports`: adapters listed with USB identity; latency timers above 1 ms warned about.

The USB adapter is the one piece of hardware absent here, so the port list and sysfs are stand-ins; the code
under test is the real lister, sysfs reader and formatter.
"""
from __future__ import annotations

from types import SimpleNamespace

from hil.runtime.ports import format_adapters, list_adapters


def _port(device, vid=0x0403, pid=0x6014):
    return SimpleNamespace(device=device, description="USB <-> Serial", vid=vid, pid=pid, serial_number="FT123",
                           manufacturer="FTDI", product="U2D2", location="1-1.2")


def _sysfs(tmp_path, name, latency):
    d = tmp_path / "bus" / "usb-serial" / "devices" / name
    d.mkdir(parents=True)
    (d / "latency_timer").write_text(f"{latency}\n")


def test_ftdi_latency_timer_above_1ms_is_warned(tmp_path):
    _sysfs(tmp_path, "ttyUSB0", 16)
    _sysfs(tmp_path, "ttyUSB1", 1)
    adapters = list_adapters(lambda: [_port("/dev/ttyUSB1"), _port("/dev/ttyUSB0")], sysfs_root=tmp_path)
    assert [a.device for a in adapters] == ["/dev/ttyUSB0", "/dev/ttyUSB1"]
    assert adapters[0].latency_timer_ms == 16 and adapters[0].warnings
    assert adapters[1].latency_timer_ms == 1 and not adapters[1].warnings
    text = format_adapters(adapters, identity=lambda vid, pid, *where: {"bus": 1, "address": 7, "bcd_device": "0600"})
    assert "0403:6014" in text and "U2D2" in text and "serial=FT123" in text
    assert "usb bus 1 address 7 bcdDevice 0600" in text
    assert text.count("WARNING") == 1 and "ttyUSB0/latency_timer" in text


def test_port_without_usb_or_sysfs_is_listed_plainly(tmp_path):
    adapters = list_adapters(lambda: [_port("/dev/ttyS0", vid=None, pid=None)], sysfs_root=tmp_path)
    assert adapters[0].latency_timer_ms is None and not adapters[0].warnings
    assert "/dev/ttyS0" in format_adapters(adapters)


def test_no_ports_says_how_to_get_a_virtual_one():
    assert "hil sim" in format_adapters([])
