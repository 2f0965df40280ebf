package digest

import (
	"encoding/binary"
	"math/bits"
)

// Size is a SHA-256 digest's length in bytes.
const Size = 32

// BlockSize is SHA-256's block size in bytes.
const BlockSize = 64

// Hash is a running SHA-256 hash; New returns one ready to write. It
// implements hash.Hash.
type Hash struct {
	h   [8]uint32
	buf [BlockSize]byte
	n   int    // bytes in buf
	len uint64 // bytes written in all
}

// iv is the initial hash value (FIPS 180-4 §5.3.3).
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// k is the round constants (FIPS 180-4 §4.2.2).
var k = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// New returns a new hash.
func New() *Hash {
	return &Hash{h: iv}
}

// Sum256 returns the SHA-256 digest of data.
func Sum256(data []byte) [Size]byte {
	h := Hash{h: iv}
	h.Write(data)
	return h.sum()
}

// Reset makes h as New returns it.
func (h *Hash) Reset() { *h = Hash{h: iv} }

// Size returns Size.
func (h *Hash) Size() int { return Size }

// BlockSize returns BlockSize.
func (h *Hash) BlockSize() int { return BlockSize }

// Write adds p to the hash; it never fails.
func (h *Hash) Write(p []byte) (int, error) {
	n := len(p)
	h.len += uint64(n)
	if h.n > 0 {
		c := copy(h.buf[h.n:], p)
		h.n += c
		p = p[c:]
		if h.n < BlockSize {
			return n, nil
		}
		h.block(h.buf[:])
		h.n = 0
	}
	for len(p) >= BlockSize {
		h.block(p[:BlockSize])
		p = p[BlockSize:]
	}
	h.n = copy(h.buf[:], p)
	return n, nil
}

// Sum appends the digest of what was written so far to b; h is unchanged.
func (h *Hash) Sum(b []byte) []byte {
	d := h.sum()
	return append(b, d[:]...)
}

// sum pads a copy of h (FIPS 180-4 §5.1.1) and returns its digest.
func (h *Hash) sum() [Size]byte {
	c := *h
	var pad [BlockSize + 8]byte
	pad[0] = 0x80
	// One 0x80, zeros to 56 mod 64, then the length in bits, big-endian.
	n := 1 + (55-c.n+BlockSize)%BlockSize
	binary.BigEndian.PutUint64(pad[n:], h.len<<3)
	c.Write(pad[:n+8])
	var d [Size]byte
	for i, v := range c.h {
		binary.BigEndian.PutUint32(d[4*i:], v)
	}
	return d
}

// block runs the compression function on one 64-byte block (FIPS 180-4
// §6.2.2).
func (h *Hash) block(p []byte) {
	var w [64]uint32
	for i := range 16 {
		w[i] = binary.BigEndian.Uint32(p[4*i:])
	}
	for i := 16; i < 64; i++ {
		s0 := bits.RotateLeft32(w[i-15], -7) ^ bits.RotateLeft32(w[i-15], -18) ^ w[i-15]>>3
		s1 := bits.RotateLeft32(w[i-2], -17) ^ bits.RotateLeft32(w[i-2], -19) ^ w[i-2]>>10
		w[i] = w[i-16] + s0 + w[i-7] + s1
	}
	a, b, c, d, e, f, g, hh := h.h[0], h.h[1], h.h[2], h.h[3], h.h[4], h.h[5], h.h[6], h.h[7]
	for i := range 64 {
		t1 := hh + (bits.RotateLeft32(e, -6) ^ bits.RotateLeft32(e, -11) ^ bits.RotateLeft32(e, -25)) + (e&f ^ ^e&g) + k[i] + w[i]
		t2 := (bits.RotateLeft32(a, -2) ^ bits.RotateLeft32(a, -13) ^ bits.RotateLeft32(a, -22)) + (a&b ^ a&c ^ b&c)
		hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
	}
	h.h[0] += a
	h.h[1] += b
	h.h[2] += c
	h.h[3] += d
	h.h[4] += e
	h.h[5] += f
	h.h[6] += g
	h.h[7] += hh
}

// Hex returns b in lower-case hexadecimal, as hex.EncodeToString does:
// written out, as encoding/hex cost the wasm guest about 0.5 KB gzip.
func Hex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

// ParseHex reads a digest written as 2*Size hexadecimal digits of either
// case; ok is false for any other string, where hex.DecodeString fails or
// decodes to another length.
func ParseHex(s string) (sum [Size]byte, ok bool) {
	if len(s) != 2*Size {
		return sum, false
	}
	for i := range sum {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return [Size]byte{}, false
		}
		sum[i] = hi<<4 | lo
	}
	return sum, true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
