//go:build !crashpoints

package crashpoint

// Hit marks a crash point; without the crashpoints build tag it does
// nothing.
func Hit(string) {}
