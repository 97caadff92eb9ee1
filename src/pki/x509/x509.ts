// @peculiar/x509 for the CA, behind the polyfill it needs: its dependency tsyringe throws at load time
// unless reflect-metadata was evaluated first (DESIGN.md "Library facts"). Import it from here only.
import 'reflect-metadata';

export {
  AuthorityKeyIdentifierExtension, BasicConstraintsExtension, ExtendedKeyUsage, ExtendedKeyUsageExtension, KeyUsageFlags,
  KeyUsagesExtension, Name, SubjectAlternativeNameExtension, SubjectKeyIdentifierExtension, X509CertificateGenerator,
} from '@peculiar/x509';
