package ddp

// Control is the DDP Control Field, the first octet of every DDP header
// (RFC 5041 §4.1): T (tagged) in bit 7, L (last) in bit 6, four reserved
// bits, and the DDP version (DV) in the low two bits.
type Control byte

// Bits of the DDP Control Field.
const (
	FlagTagged   Control = 0x80
	FlagLast     Control = 0x40
	reservedMask Control = 0x3c
	versionMask  Control = 0x03
)

// Version is the only DDP version defined (RFC 5041 §4.1: DV MUST be 1).
const Version = 1

// MakeControl returns the control octet for version 1 with the given flags
// and the reserved bits zero, as a sender must set them.
func MakeControl(tagged, last bool) Control {
	c := Control(Version)
	if tagged {
		c |= FlagTagged
	}
	if last {
		c |= FlagLast
	}
	return c
}

// Tagged reports the T flag.
func (c Control) Tagged() bool { return c&FlagTagged != 0 }

// Last reports the L flag: this segment is the last of its message.
func (c Control) Last() bool { return c&FlagLast != 0 }

// Version returns the DV field.
func (c Control) Version() uint8 { return uint8(c & versionMask) }

// Reserved returns the four reserved bits (shifted down). Receivers ignore
// them; siw does not check them either.
func (c Control) Reserved() uint8 { return uint8(c&reservedMask) >> 2 }
