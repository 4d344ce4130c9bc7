package assets

import "io/fs"

// stamp identifies a version of a file without reading it, to know when a
// cached hash is stale. Size and modification time alone are not enough:
// a deploy (cp, checkout, unzip) may give new bytes the old time. Where the
// system tells them (see stampSys), the inode and the change time, which no
// program can set back, are part of it too.
type stamp struct {
	size, mod  int64
	ino, ctime int64
}

func stampOf(info fs.FileInfo) stamp {
	st := stamp{size: info.Size(), mod: info.ModTime().UnixNano()}
	st.ino, st.ctime = stampSys(info.Sys())
	return st
}
