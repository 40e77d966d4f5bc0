package forward

import "testing"

// TestRed16GrowNeverFits: a growth no budget could give (a large body's hold past what large
// bodies may hold, 983,040 of 1 MiB; any body's past the whole budget) returns false at once,
// with the bytes in use, and does not wait: a body over 64 KiB reserved next is not held up by
// it. One byte less than the large share still waits (room can come). On main such a growth
// waited (another body held 65,536, so not every byte was a waiter's), and the 131,072-byte
// reservation after it was refused.
func TestRed16GrowNeverFits(t *testing.T) {
	b := NewBodyBudget(1 << 20)
	other := &Hold{}
	if ok, _ := b.Reserve(other, 65536); !ok {
		t.Fatal("the small body did not fit")
	}
	for _, tc := range []struct {
		name   string
		held   int64 // the growing body's own bytes before
		n      int64
		result bool // false: refused at once
	}{
		{name: "large past its share", n: 1 << 20},
		{name: "held bytes and growth past the share", held: 524288, n: 524288},
		{name: "small hold jumping past the share", held: 32768, n: 983040 - 32768 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Hold{}
			if tc.held > 0 {
				if ok, _ := b.Reserve(h, tc.held); !ok {
					t.Fatal("the held bytes did not fit")
				}
			}
			res := growAsync(b, h, tc.n, nil)
			for {
				select {
				case r := <-res:
					if r.ok || r.inUse != 65536+tc.held {
						t.Fatalf("Grow: %t with %d in use, want false with %d", r.ok, r.inUse, 65536+tc.held)
					}
				default:
					if b.Waiting() != 0 {
						t.Fatalf("the growth that can never fit waits")
					}
					continue
				}
				break
			}
			large := &Hold{}
			if ok, inUse := b.Reserve(large, 131072); !ok {
				t.Fatalf("a 131,072-byte body refused after it (%d in use)", inUse)
			}
			b.Release(large)
			b.Release(h)
			if b.InUse() != 65536 || b.Waiting() != 0 {
				t.Fatalf("in use %d, waiting %d; want 65536, 0", b.InUse(), b.Waiting())
			}
		})
	}
	// 983,040 exactly (the whole large share) can fit once a large body holding 131,072 is
	// gone: it waits, and gets it.
	large := &Hold{}
	if ok, _ := b.Reserve(large, 131072); !ok {
		t.Fatal("the large body did not fit")
	}
	h := &Hold{}
	res := growAsync(b, h, 983040, nil)
	waitFor(t, "the growth that can fit waits", func() bool { return b.Waiting() == 1 })
	b.Release(large)
	if r := <-res; !r.ok || r.inUse != 65536+983040 {
		t.Fatalf("Grow: %t with %d in use, want true with %d", r.ok, r.inUse, 65536+983040)
	}
	b.Release(h)
	b.Release(other)
	if b.InUse() != 0 || b.Waiting() != 0 {
		t.Fatalf("in use %d, waiting %d; want 0, 0", b.InUse(), b.Waiting())
	}
}
