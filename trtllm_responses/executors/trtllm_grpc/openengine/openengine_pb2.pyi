from . import generation_pb2 as _generation_pb2
from . import kv_pb2 as _kv_pb2
from . import lifecycle_pb2 as _lifecycle_pb2
from . import lora_pb2 as _lora_pb2
from . import model_pb2 as _model_pb2
from . import server_pb2 as _server_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
