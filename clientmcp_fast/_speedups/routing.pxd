cpdef tuple route(bytes target)
