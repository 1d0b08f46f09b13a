# Address types of JGroups 2.12 (logical UUIDs and physical IpAddresses). Wire codecs live in the dialect.
from libc.stdint cimport int32_t, int64_t


cdef class Address:
    cpdef int32_t java_hash(self)
    cpdef object _eq(self, object other)
    cpdef int compare_to(self, object other) except? -2


cdef class UUID(Address):
    cdef readonly int64_t msb
    cdef readonly int64_t lsb
    cdef readonly object additional_data   # bytes or None (deprecated 2.7-compat field)


cdef class PayloadUUID(UUID):
    cdef readonly object payload            # str or None


cdef class AdditionalDataUUID(UUID):
    cdef readonly object payload            # bytes or None


cdef class TopologyUUID(UUID):
    cdef readonly object site_id
    cdef readonly object rack_id
    cdef readonly object machine_id


cdef class IpAddress(Address):
    cdef readonly bytes ip                  # packed 4 (IPv4) or 16 (IPv6) bytes, or None
    cdef readonly int port                  # 0..65535
    cdef readonly object scope_id           # int for IPv6, None for IPv4
    cdef readonly object additional_data    # bytes or None


cdef UUID make_uuid(int64_t msb, int64_t lsb)
