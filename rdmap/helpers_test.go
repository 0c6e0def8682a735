package rdmap

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// mpaLikeErr stands for an error of the mpa package: any error whose chain
// holds a termcode.Code.
var mpaLikeErr = fmt.Errorf("mpa: bad CRC: %w", termcode.MPACRC)
