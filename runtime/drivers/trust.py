"""Which driver code may run: code carried by a part runs on the host only when trusted.

Trusted means its SHA-256 is allow-listed, or its source is signed (Ed25519) by a key the user trusts. The
trust file is YAML: ``{sha256: [hex, ...], keys: {key_id: public-key-hex, ...}}``, by default
``$HIL_TRUST_FILE`` or ``~/.config/hil/trust.yaml``; a missing file trusts nothing. Signatures are checked with
the `cryptography` package (a well-kept implementation; never hand-rolled crypto).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hil.devices.descriptor import DriverCode
from hil.devices.yaml_source import ConfigError, load_yaml_file

from ..paths import user_path


def default_trust_file() -> Path:
    return user_path("HIL_TRUST_FILE", "XDG_CONFIG_HOME", ".config", "hil", "trust.yaml")


@dataclass(frozen=True)
class TrustDecision:
    trusted: bool
    reason: str


@dataclass
class TrustStore:
    hashes: set[str] = field(default_factory=set)
    keys: dict[str, bytes] = field(default_factory=dict)  # key id -> raw 32-byte Ed25519 public key
    source: str = "<memory>"

    @classmethod
    def load(cls, path: str | Path | None = None) -> "TrustStore":
        path = Path(path) if path is not None else default_trust_file()
        if not path.exists():
            return cls(source=str(path))
        doc = load_yaml_file(path, "trust") or {}
        if not isinstance(doc, dict):
            raise ConfigError(str(path), getattr(doc, "line", 1),
                              f"a trust file is a mapping (sha256: [...], keys: {{...}}), not {type(doc).__name__}")
        hashes = doc.get("sha256", []) or []
        keys = doc.get("keys", {}) or {}
        if not isinstance(hashes, list) or not all(isinstance(h, str) and len(h) == 64 for h in hashes):
            raise ConfigError(str(path), getattr(doc, "line_of", lambda k: None)("sha256"),
                              "sha256 must be a list of 64-character hex digests")
        try:
            raw_keys = {str(k): bytes.fromhex(v) for k, v in keys.items()}
        except (ValueError, TypeError, AttributeError):
            raise ConfigError(str(path), getattr(doc, "line_of", lambda k: None)("keys"),
                              "keys must map a key id to a 64-character hex Ed25519 public key") from None
        return cls({h.lower() for h in hashes}, raw_keys, str(path))

    def decide(self, code: DriverCode) -> TrustDecision:
        if code.sha256 in self.hashes:
            return TrustDecision(True, f"sha256 {code.sha256[:16]}... is allow-listed in {self.source}")
        if code.signature and code.key_id in self.keys:
            try:
                Ed25519PublicKey.from_public_bytes(self.keys[code.key_id]).verify(
                    bytes.fromhex(code.signature), code.source.encode())
                return TrustDecision(True, f"signed by trusted key {code.key_id!r}")
            except (InvalidSignature, ValueError):
                return TrustDecision(False, f"signature by key {code.key_id!r} does not verify")
        why = f"signed by unknown key {code.key_id!r}" if code.signature else "unsigned and not allow-listed"
        return TrustDecision(False, why)

    def how_to_trust(self, code: DriverCode) -> str:
        return (f"to trust it, run `hil trust {code.sha256}` (adds the hash to {self.source})"
                + (f", or add key {code.key_id!r} under keys: in that file" if code.key_id else ""))

    def add_hash(self, sha256: str, path: str | Path | None = None) -> Path:
        """Allow-list a hash in the trust file (created if missing)."""
        import yaml

        path = Path(path) if path is not None else Path(self.source)
        self.hashes.add(sha256.lower())
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"sha256": sorted(self.hashes), "keys": {k: v.hex() for k, v in sorted(self.keys.items())}}
        path.write_text(yaml.safe_dump(doc, sort_keys=True))
        return path
