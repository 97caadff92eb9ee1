// Certificate enrollment over TLS (issue 27): the listener with native /pki/enroll, /pki/reenroll and EST.
export { createEnrollmentListener, type EnrollmentListener, type EnrollmentSettings } from './listener.js';
