"""Control tables: typed registers (frames <-> registers) and the memory that enforces their access rules."""
from .memory import RegisterMemory, WriteRule
from .registers import Access, Area, ControlTable, Register
from .x_series import (BAUD_RATES, CURRENT_BASED_POSITION_MODE, CURRENT_MODE, EXTENDED_POSITION_MODE,
                    POSITION_MODE, POSITION_P_GAIN_DIVISOR, PWM_FULL_SCALE, TABLES_BY_MODEL, TABLES_BY_NAME,
                    TORQUE_CONSTANT_NM_PER_A, VELOCITY_MODE, XL430_W250, XM430_W350, XM430_W350_MODEL_NUMBER,
                    position_stiffness)

__all__ = [name for name in dir() if not name.startswith("_")]
