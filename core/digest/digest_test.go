package digest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/digest"
)

var _ hash.Hash = digest.New()

// The examples of FIPS 180-4's companion document, and the empty string.
func TestKnownDigests(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{strings.Repeat("a", 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
	} {
		sum := digest.Sum256([]byte(c.in))
		require.Equal(t, c.want, hex.EncodeToString(sum[:]), "%d bytes", len(c.in))
	}
}

// Every length around the padding's edges (55, 56, 63, 64 bytes mod 64),
// written whole and in pieces, gives crypto/sha256's digest.
func TestMatchesCryptoSHA256(t *testing.T) {
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	for n := range len(data) {
		want := sha256.Sum256(data[:n])
		got := digest.Sum256(data[:n])
		require.Equal(t, want, got, "Sum256 of %d bytes", n)
		h := digest.New()
		for i := 0; i < n; i += 13 {
			h.Write(data[i:min(i+13, n)])
		}
		require.Equal(t, want[:], h.Sum(nil), "13-byte writes of %d bytes", n)
	}
}

// Sum leaves the hash as it was: writing on after it gives the digest of
// the whole; Reset starts again.
func TestSumThenWrite(t *testing.T) {
	h := digest.New()
	h.Write([]byte("hello, "))
	first := h.Sum([]byte("prefix"))
	require.Equal(t, "prefix", string(first[:6]))
	want := sha256.Sum256([]byte("hello, "))
	require.Equal(t, want[:], first[6:])
	h.Write([]byte("world"))
	want = sha256.Sum256([]byte("hello, world"))
	require.Equal(t, want[:], h.Sum(nil))
	h.Reset()
	want = sha256.Sum256(nil)
	require.Equal(t, want[:], h.Sum(nil))
	require.Equal(t, digest.Size, h.Size())
	require.Equal(t, digest.BlockSize, h.BlockSize())
}

func FuzzMatchesCryptoSHA256(f *testing.F) {
	f.Add([]byte("abc"), uint8(1))
	f.Add(make([]byte, 119), uint8(64))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		step := int(chunk) + 1
		h := digest.New()
		for i := 0; i < len(data); i += step {
			h.Write(data[i:min(i+step, len(data))])
		}
		want := sha256.Sum256(data)
		require.Equal(t, want[:], h.Sum(nil))
		require.Equal(t, want, digest.Sum256(data))
	})
}

func BenchmarkSum256(b *testing.B) {
	data := make([]byte, 1024)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		digest.Sum256(data)
	}
}

// Hex and ParseHex agree with encoding/hex: lower case out, either case
// in, and ParseHex fails wherever DecodeString fails or gives a length
// other than Size.
func TestHexIsEncodingHex(t *testing.T) {
	for _, data := range []string{"", "abc", strings.Repeat("\x00\xff\x10\x9a", 40)} {
		sum := sha256.Sum256([]byte(data))
		require.Equal(t, hex.EncodeToString(sum[:]), digest.Hex(sum[:]))
		require.Equal(t, hex.EncodeToString([]byte(data)), digest.Hex([]byte(data)))
	}
	sum := sha256.Sum256([]byte("x"))
	good := hex.EncodeToString(sum[:])
	for _, s := range []string{
		good, strings.ToUpper(good), good[:63], good + "0", good[:62], good + "00", "",
		good[:10] + "g" + good[11:], good[:10] + "G" + good[11:], good[:63] + " ", good[:10] + "\xff" + good[11:],
		strings.Repeat("0", 64), strings.Repeat("fF", 32), strings.Repeat("/", 64), strings.Repeat(":", 64), strings.Repeat("@", 64), strings.Repeat("`", 64),
	} {
		want, err := hex.DecodeString(s)
		wantOK := err == nil && len(want) == digest.Size
		got, ok := digest.ParseHex(s)
		require.Equal(t, wantOK, ok, s)
		if ok {
			require.Equal(t, want, got[:], s)
		}
	}
	for c := range 256 {
		s := strings.Repeat("a", 63) + string(byte(c))
		want, err := hex.DecodeString(s)
		got, ok := digest.ParseHex(s)
		require.Equal(t, err == nil, ok, c)
		if ok {
			require.Equal(t, want, got[:], c)
		}
	}
}
