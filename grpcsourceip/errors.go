package grpcsourceip

import "errors"

// ErrInvalidConfig is wrapped by errors from [New].
var ErrInvalidConfig = errors.New("grpcsourceip: invalid configuration")
