package termcode_test

import (
	"errors"
	"fmt"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Whichever layer found a failure, errors.As finds its Terminate code.
func Example() {
	err := fmt.Errorf("receiving: %w", ddp.NewError(termcode.DDPUntaggedNoBuffer, nil, 0))
	var c termcode.Code
	if errors.As(err, &c) {
		fmt.Println(c.Layer(), c.Triple(), c == termcode.DDPUntaggedNoBuffer)
		fmt.Println(c)
	}
	// Output:
	// DDP 1/2/0x02 true
	// DDP Untagged Buffer Error: Invalid MSN - no buffer available (1/2/0x02)
}
