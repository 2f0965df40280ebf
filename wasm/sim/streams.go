package sim

import "math/rand/v2"

// Each of the simulator's generators draws a stream of its own for tree i:
// rand.NewPCG(seed^key, i), with a key of its own (below), so that turning
// one option on or off changes nothing another draws, and no two draw the
// same numbers. Until session 53 the final-ask share, the provider's
// retry budget and the question asker shared one key, so a tree's three
// first draws were one number; giving them keys of their own changed the
// history of every seed once (doc.go). TestStreamKeysAreDistinct keeps
// the keys apart, and every generator's key here.
const (
	keyTree       = 0 // the tree's own generator: kills, zombies, the disk
	keyWorkload   = 0x9e3779b97f4a7c15
	keyEchoes     = 0xc2b2ae3d27d4eb4f
	keyGoesOn     = 0x165667b19e3779f9
	keyBudget     = 0x5851f42d4c957f2d
	keyFinalAsk   = 0x2545f4914f6cdd1d
	keyRetries    = 0xbf58476d1ce4e5b9
	keyAsker      = 0x9fb21c651e98df25
	keyQuietChild = 0x85ebca6b27d4eb2f
	keyDeletes    = 0x61c8864680b583eb
	keyScripted   = 0x1b873593cc9e2d51
	keyProvider   = 0x94d049bb133111eb // per step, not per tree (stepRng)
	keyBootFault  = 0xd6e8feb86659fd93
	keyBootLock   = 0x8cb92ba72f3d8dd7
	keyDelFault   = 0x4cf5ad432745937f
	keyFlood      = 0xa0761d6478bd642f
	keyReopenRace = 0xe7037ed1a0b428db
	keyStops      = 0x2d358dccaa6c78a5
)

// stream is the generator of key for tree i of the campaign seed.
func stream(seed, key uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^key, uint64(i)))
}
