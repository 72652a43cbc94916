"""Part descriptors (the modular-robot reference): the schema, validation with errors naming part and field, and the
bytes."""
from .codec import MAX_DESCRIPTOR_BYTES, decode_descriptor, descriptor_sha256, encode_descriptor
from .schema import (KINDS, SCHEMA_VERSION, Body, DriverCode, Inertial, Joint, JointLimits, PartDescriptor, Port,
                     Pose, RegisterSpec, Sensor, Shape)
from .validate import DescriptorError, descriptor_from_dict, descriptor_to_dict

__all__ = [name for name in dir() if not name.startswith("_")]
