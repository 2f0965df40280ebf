package conform

import "testing"

// T is what a conformance suite needs from its test: *testing.T's methods
// of the same names, with Run taking a func(T).
type T interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	FailNow()
	Failed() bool
	Skip(args ...any)
	Cleanup(f func())
	Run(name string, f func(t T)) bool
}

// Wrap makes a *testing.T a T.
func Wrap(t *testing.T) T { return std{t} }

type std struct{ *testing.T }

func (s std) Run(name string, f func(t T)) bool {
	return s.T.Run(name, func(t *testing.T) { f(std{t}) })
}
