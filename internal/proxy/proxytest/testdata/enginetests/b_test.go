package p_test

import (
	"testing"

	"example.com/p"
)

// start has the name of p's start but does not read the flag.
func start(t *testing.T) {}

func TestExternalOwnStart(t *testing.T) { start(t) }
func TestExternalViaPkg(t *testing.T)   { p.Exported(t) }
