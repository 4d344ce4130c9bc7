package assets

import "syscall"

// stampSys is the inode and change time of an os file (0, 0 for others).
func stampSys(sys any) (ino, ctime int64) {
	if st, ok := sys.(*syscall.Stat_t); ok {
		return int64(st.Ino), st.Ctim.Nano()
	}
	return 0, 0
}
