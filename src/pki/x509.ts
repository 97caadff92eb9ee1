// @peculiar/x509 for the CA, behind the polyfill it needs: its dependency tsyringe throws at load time
// unless reflect-metadata was evaluated first (DESIGN.md "Library facts"). Import it from here only.
import 'reflect-metadata';

export { Name } from '@peculiar/x509';
