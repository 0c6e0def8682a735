package rdmap

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// errMPALike stands for an error of the mpa package: any error whose chain
// holds a termcode.Code.
var errMPALike = fmt.Errorf("mpa: bad CRC: %w", termcode.MPACRC)
