package receiver

// BodiesInUse is the memory charged to request bodies now, for tests
// outside the package that must wait until uploads they hold are charged.
func (rc *Receiver) BodiesInUse() int64 { return rc.bodies.inUse() }
